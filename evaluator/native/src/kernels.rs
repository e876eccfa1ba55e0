//! The pure kernels of call pairing, free of Python: floating-point sums as CPython's
//! `sum()` computes them, `math.isclose`, the longest increasing subsequence and the
//! maximum-weight pairing inside one tool-name group. Each mirrors a function of
//! `tracepass.evaluator.scoring` operation for operation, so both paths give the same
//! floats, not merely close ones (the Python modules are the reference implementation).

/// How CPython's built-in `sum()` adds floats: left to right before 3.12, with
/// Neumaier's compensation from 3.12 on (the same list can differ in the last bit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SumMode {
    Naive,
    Neumaier,
}

/// `sum(values)` (start 0) over Python floats, as the running interpreter computes it.
pub fn py_sum<I: IntoIterator<Item = f64>>(values: I, mode: SumMode) -> f64 {
    let mut it = values.into_iter();
    // 0 + x is x exactly: CPython's int start turns into the first float.
    let Some(first) = it.next() else { return 0.0 };
    let mut total = first;
    match mode {
        SumMode::Naive => {
            for x in it {
                total += x;
            }
            total
        }
        SumMode::Neumaier => {
            let mut c = 0.0_f64;
            for x in it {
                let t = total + x;
                if total.abs() >= x.abs() {
                    c += (total - t) + x;
                } else {
                    c += (x - t) + total;
                }
                total = t;
            }
            if c != 0.0 && c.is_finite() {
                total += c;
            }
            total
        }
    }
}

/// `math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)` for non-negative tolerances.
pub fn isclose(a: f64, b: f64, rel_tol: f64, abs_tol: f64) -> bool {
    if a == b {
        return true;
    }
    if a.is_infinite() || b.is_infinite() {
        return false;
    }
    let diff = (b - a).abs();
    diff <= (rel_tol * b).abs() || diff <= (rel_tol * a).abs() || diff <= abs_tol
}

/// Length of the longest strictly increasing subsequence (patience sorting).
pub fn lis_length(seq: &[usize]) -> usize {
    let mut tails: Vec<usize> = Vec::with_capacity(seq.len());
    for &x in seq {
        let k = tails.partition_point(|&t| t < x);
        if k == tails.len() {
            tails.push(x);
        } else {
            tails[k] = x;
        }
    }
    tails.len()
}

/// (actual index, expected index, argument score).
pub type Pair = (usize, usize, f64);

/// `tool_correctness._group_assign` for one name group: `scores[i][j]` is the score of
/// actual call `a_idx[i]` against expected call `e_idx[j]`. None where Python hands the
/// group to scipy's `linear_sum_assignment` (both sides > 1 and m·n > 16): the caller
/// then takes the Python path, whose tie-breaking is scipy's.
pub fn group_assign(
    a_idx: &[usize],
    e_idx: &[usize],
    scores: &[Vec<f64>],
    mode: SumMode,
) -> Option<Vec<Pair>> {
    let (m, n) = (a_idx.len(), e_idx.len());
    if m == 1 {
        let row = &scores[0];
        let best = first_max(n, |j| row[j]);
        return Some(vec![(a_idx[0], e_idx[best], row[best])]);
    }
    if n == 1 {
        let best = first_max(m, |i| scores[i][0]);
        return Some(vec![(a_idx[best], e_idx[0], scores[best][0])]);
    }
    if m * n > 16 {
        return None;
    }
    let eps = 1e-9 / ((m + n) as f64);
    let mut out = Vec::with_capacity(m.min(n));
    if m <= n {
        // Injections of the actual calls into the expected ones, in the order of
        // `itertools.permutations(range(n), m)`; the first strictly best total wins.
        let best = best_injection(m, n, mode, |i, j| scores[i][j] - eps * i.abs_diff(j) as f64);
        for (i, &j) in best.iter().enumerate() {
            out.push((a_idx[i], e_idx[j], scores[i][j]));
        }
    } else {
        let best = best_injection(n, m, mode, |j, i| scores[i][j] - eps * i.abs_diff(j) as f64);
        for (j, &i) in best.iter().enumerate() {
            out.push((a_idx[i], e_idx[j], scores[i][j]));
        }
    }
    Some(out)
}

/// The index of the first maximum of `f` over 0..len (`max(range(len), key=(f(k), -k))`;
/// scores are never NaN).
fn first_max(len: usize, f: impl Fn(usize) -> f64) -> usize {
    let mut best = 0;
    let mut best_value = f(0);
    for k in 1..len {
        let v = f(k);
        if v > best_value {
            best = k;
            best_value = v;
        }
    }
    best
}

/// Over the k-permutations of 0..n in lexicographic order (`permutations(range(n), k)`),
/// the first whose total of `term(position, chosen)` (summed as `sum()` does) is
/// strictly greater than every earlier one, starting from -1.0 as the Python code does.
fn best_injection(
    k: usize,
    n: usize,
    mode: SumMode,
    term: impl Fn(usize, usize) -> f64,
) -> Vec<usize> {
    let mut best_total = -1.0_f64;
    let mut best: Vec<usize> = Vec::new();
    let mut perm: Vec<usize> = Vec::with_capacity(k);
    let mut used = vec![false; n];
    fn walk(
        k: usize,
        n: usize,
        mode: SumMode,
        term: &dyn Fn(usize, usize) -> f64,
        perm: &mut Vec<usize>,
        used: &mut [bool],
        best_total: &mut f64,
        best: &mut Vec<usize>,
    ) {
        if perm.len() == k {
            let total = py_sum(perm.iter().enumerate().map(|(p, &c)| term(p, c)), mode);
            if total > *best_total {
                *best_total = total;
                best.clone_from(perm);
            }
            return;
        }
        for c in 0..n {
            if !used[c] {
                used[c] = true;
                perm.push(c);
                walk(k, n, mode, term, perm, used, best_total, best);
                perm.pop();
                used[c] = false;
            }
        }
    }
    walk(k, n, mode, &term, &mut perm, &mut used, &mut best_total, &mut best);
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_as_cpython() {
        assert_eq!(py_sum([], SumMode::Naive), 0.0);
        assert_eq!(py_sum([0.1, 0.2, 0.3], SumMode::Naive), 0.1 + 0.2 + 0.3);
        // 3.12's compensated sum: the exact 0.6 rounds to 0.6, not 0.6000000000000001.
        assert_eq!(py_sum([0.1, 0.2, 0.3], SumMode::Neumaier), 0.6);
        assert_eq!(py_sum([1e100, 1.0, -1e100], SumMode::Neumaier), 1.0);
        assert_eq!(py_sum([1e100, 1.0, -1e100], SumMode::Naive), 0.0);
    }

    #[test]
    fn isclose_as_math() {
        assert!(isclose(1.0, 1.0 + 1e-10, 1e-9, 0.0));
        assert!(!isclose(1.0, 1.1, 1e-9, 0.0));
        assert!(isclose(1.0, 1.1, 0.0, 0.2));
        assert!(!isclose(f64::NAN, f64::NAN, 1e-9, 1.0));
        assert!(isclose(f64::INFINITY, f64::INFINITY, 1e-9, 0.0));
        assert!(!isclose(f64::INFINITY, 1e308, 1.0, 1e308));
    }

    #[test]
    fn lis() {
        assert_eq!(lis_length(&[]), 0);
        assert_eq!(lis_length(&[0, 1, 2]), 3);
        assert_eq!(lis_length(&[2, 0, 1]), 2);
        assert_eq!(lis_length(&[3, 1, 2, 0]), 2);
    }

    #[test]
    fn pairs_identical_calls_in_order() {
        let s = vec![vec![1.0, 1.0], vec![1.0, 1.0]];
        let got = group_assign(&[0, 1], &[0, 1], &s, SumMode::Naive).unwrap();
        assert_eq!(got, vec![(0, 0, 1.0), (1, 1, 1.0)]);
    }

    #[test]
    fn pairs_by_score_then_order() {
        let s = vec![vec![0.5, 1.0, 0.5]];
        assert_eq!(group_assign(&[4], &[0, 1, 2], &s, SumMode::Naive).unwrap(), vec![(4, 1, 1.0)]);
        let s = vec![vec![0.5], vec![0.5]];
        assert_eq!(group_assign(&[3, 7], &[2], &s, SumMode::Naive).unwrap(), vec![(3, 2, 0.5)]);
        // More actual than expected calls: each expected call gets its best actual one.
        let s = vec![vec![0.0, 0.0], vec![1.0, 0.0], vec![0.0, 1.0]];
        let got = group_assign(&[0, 1, 2], &[0, 1], &s, SumMode::Neumaier).unwrap();
        assert_eq!(got, vec![(1, 0, 1.0), (2, 1, 1.0)]);
    }

    #[test]
    fn large_groups_are_left_to_python() {
        let s = vec![vec![0.0; 5]; 4];
        assert!(group_assign(&[0, 1, 2, 3], &[0, 1, 2, 3, 4], &s, SumMode::Naive).is_none());
    }
}
