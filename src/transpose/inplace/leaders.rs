//! A-priori cycle leaders of the chunked transposition permutation (GKK, after Pall and
//! Seiden): the chunk at position `k` of an `m × n` problem moves to `k*n mod q`, `q = mn - 1`
//! (positions `0` and `q` stay). The positions split by `v = gcd(k, q)` into one subproblem
//! per divisor `v < q`; each is multiplication by `n` on the units modulo `q' = q / v`.
//!
//! Through the Chinese remainder theorem and one generator per prime power of `q'` (a
//! primitive root for odd primes; `-1` and `5` for the power of two) a unit becomes a vector
//! of exponents ("indices"), and multiplying by `n` adds `n`'s indices componentwise. With
//! `K_i` the period of axis `i` (the multiplicative order of `n`'s component), `d_i = N_i /
//! K_i` (`N_i` the axis' group order) and `L_i = gcd(K_i, lcm(K_1..K_{i-1}))`, the box
//! `0 <= s_i < d_i L_i` holds exactly one element of every cycle (Theorem 3.1 of Gustavson,
//! Karlsson and Kågström), and every cycle of the subproblem has length `lcm(K_i)`.
//!
//! Leaders are produced back in the multiplicative domain as a sum over the primes of
//! `p^(e-f) * (q / p^e) * g^s mod q` (constant shifts of the box are allowed, so the CRT
//! coefficients are dropped); an odometer over the box updates one term per leader with one
//! modular product, so generation needs a few words of memory however many cycles there are.

use super::numtheory::{
    add_mod, factor, gcd, lcm, mul_mod, multiplicative_order, pow_mod, primitive_root, sub_mod,
};
use crate::error::{Error, Result};

/// One enumerated axis of a subproblem's leader box: its range and the multiplier that steps
/// the owning prime's term.
#[derive(Clone, Debug)]
struct Axis {
    /// Index of the prime (term) this axis belongs to.
    term: usize,
    /// Multiplier of that term per step (a generator's residue, as an integer mod q).
    mult: u64,
    /// Number of values of this index in the box (> 1; axes of range 1 are dropped).
    range: u64,
}

/// The cycles of one divisor subproblem: all positions `k` with `gcd(k, q) = v`. Every cycle
/// of it has the same length.
#[derive(Clone, Debug)]
pub struct Subproblem {
    divisor: u64,
    cycle_len: u64,
    count: u64,
    q: u64,
    /// Each prime's term for the all-zero index vector.
    init: Vec<u64>,
    /// Sum of `init` mod q: the leader with index 0.
    base: u64,
    /// Axes with range > 1, grouped by term, outermost first.
    axes: Vec<Axis>,
}

impl Subproblem {
    /// The divisor `v = gcd(k, q)` shared by the positions of this subproblem.
    pub fn divisor(&self) -> u64 {
        self.divisor
    }
    /// Length of each of its cycles (1: fixed points).
    pub fn cycle_len(&self) -> u64 {
        self.cycle_len
    }
    /// Number of cycles.
    pub fn count(&self) -> u64 {
        self.count
    }
    /// The leaders with numbers `first..first + len` (clamped to `count`), in box order.
    pub fn leaders(&self, first: u64, len: u64) -> LeaderIter<'_> {
        LeaderIter::new(
            self,
            first.min(self.count),
            len.min(self.count - first.min(self.count)),
        )
    }
}

/// Iterator over a run of one subproblem's leaders (an odometer over the leader box).
#[derive(Clone, Debug)]
pub struct LeaderIter<'a> {
    sub: &'a Subproblem,
    digits: Vec<u64>,
    /// `term_at[a]`: the term of axis a's prime given the digits up to a (inner ones zero).
    term_at: Vec<u64>,
    /// `acc[a]`: the leader given the digits up to a (inner ones zero).
    acc: Vec<u64>,
    remaining: u64,
}

impl<'a> LeaderIter<'a> {
    fn new(sub: &'a Subproblem, first: u64, len: u64) -> Self {
        let na = sub.axes.len();
        let mut digits = vec![0u64; na];
        let mut rest = first;
        for a in (0..na).rev() {
            digits[a] = rest % sub.axes[a].range;
            rest /= sub.axes[a].range;
        }
        let q = sub.q;
        let mut terms = sub.init.clone();
        let mut total = sub.base;
        let (mut term_at, mut acc) = (vec![0u64; na], vec![0u64; na]);
        for (a, ax) in sub.axes.iter().enumerate() {
            let t = mul_mod(terms[ax.term], pow_mod(ax.mult, digits[a], q), q);
            total = add_mod(sub_mod(total, terms[ax.term], q), t, q);
            terms[ax.term] = t;
            term_at[a] = t;
            acc[a] = total;
        }
        LeaderIter {
            sub,
            digits,
            term_at,
            acc,
            remaining: len,
        }
    }

    fn advance(&mut self) {
        let (axes, q) = (&self.sub.axes, self.sub.q);
        let mut a = axes.len();
        while a > 0 {
            a -= 1;
            self.digits[a] += 1;
            if self.digits[a] < axes[a].range {
                let t = mul_mod(self.term_at[a], axes[a].mult, q);
                self.acc[a] = add_mod(sub_mod(self.acc[a], self.term_at[a], q), t, q);
                self.term_at[a] = t;
                for b in a + 1..axes.len() {
                    self.digits[b] = 0;
                    self.term_at[b] = if axes[b].term == axes[b - 1].term {
                        self.term_at[b - 1]
                    } else {
                        self.sub.init[axes[b].term]
                    };
                    self.acc[b] = self.acc[b - 1];
                }
                return;
            }
        }
    }
}

impl Iterator for LeaderIter<'_> {
    type Item = u64;
    fn next(&mut self) -> Option<u64> {
        if self.remaining == 0 {
            return None;
        }
        let out = self.acc.last().copied().unwrap_or(self.sub.base);
        self.remaining -= 1;
        if self.remaining > 0 {
            self.advance();
        }
        Some(out)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let r = usize::try_from(self.remaining).unwrap_or(usize::MAX);
        (r, Some(r))
    }
}

/// A complete leader set of the `m × n` chunked transposition permutation, one
/// [`Subproblem`] per divisor `v < q` of `q = mn - 1` (fixed points included, as
/// subproblems of cycle length 1).
///
/// ```
/// use ttgt::transpose::inplace::CycleLeaders;
/// // m = 5, n = 3 (the paper's example): q = 14, cycles (1 3 9 13 11 5) (2 6 4 12 8 10) (7)
/// let c = CycleLeaders::new(5, 3).unwrap();
/// let mut all: Vec<(u64, u64)> = c.iter().collect();
/// all.sort();
/// assert_eq!(all.len(), 3);
/// assert_eq!(all.iter().map(|&(_, len)| len).collect::<Vec<_>>().iter().sum::<u64>(), 13);
/// assert!(all.contains(&(7, 1)));
/// ```
#[derive(Clone, Debug)]
pub struct CycleLeaders {
    q: u64,
    subs: Vec<Subproblem>,
}

/// Per-prime data of `q`'s factorization.
struct PrimeData {
    p: u64,
    e: u32,
    /// `q / p^e`.
    cofactor: u64,
    /// Generator multiplier (odd primes).
    gen: u64,
    /// `k[f]`: the order of `n`'s component modulo `p^f` (for 2: of the `5`-part), f = 0..=e.
    k: Vec<u64>,
    /// For 2: the order of the sign part (1 or 2).
    k_sign: u64,
}

impl CycleLeaders {
    /// Computes the leader set of the `m × n` problem (GKK, the paper's Algorithm 5): factor
    /// `q`, the orders of `n` modulo each prime power (and each lower power), primitive roots
    /// where `n` is not one, then one leader box per divisor. Errors when `m * n` overflows
    /// 64 bits.
    ///
    /// ```
    /// let c = ttgt::transpose::inplace::CycleLeaders::new(68, 227).unwrap();
    /// let main = c.subproblems().iter().find(|s| s.divisor() == 1).unwrap();
    /// assert_eq!((main.cycle_len(), main.count()), (84, 84)); // the paper's worked example
    /// ```
    pub fn new(m: usize, n: usize) -> Result<Self> {
        let mn = (m as u64)
            .checked_mul(n as u64)
            .ok_or_else(|| Error::SizeOverflow {
                what: format!("a {m} x {n} transposition"),
            })?;
        if mn <= 2 {
            return Ok(CycleLeaders {
                q: mn.saturating_sub(1),
                subs: Vec::new(),
            });
        }
        let q = mn - 1;
        let n = n as u64 % q;
        let primes: Vec<PrimeData> = factor(q)
            .into_iter()
            .map(|(p, e)| prime_data(q, n, p, e))
            .collect();
        let mut subs = Vec::new();
        let mut f: Vec<u32> = primes.iter().map(|_| 0).collect();
        // every exponent vector f (q' = prod p^f), except all zeros (q' = 1)
        loop {
            let mut i = 0;
            while i < f.len() && f[i] == primes[i].e {
                f[i] = 0;
                i += 1;
            }
            if i == f.len() {
                break;
            }
            f[i] += 1;
            subs.push(subproblem(q, &primes, &f));
        }
        Ok(CycleLeaders { q, subs })
    }

    /// `q = mn - 1` (0 when `mn <= 1`).
    pub fn q(&self) -> u64 {
        self.q
    }

    /// The divisor subproblems.
    pub fn subproblems(&self) -> &[Subproblem] {
        &self.subs
    }

    /// Number of cycles of length > 1.
    pub fn nontrivial_cycles(&self) -> u64 {
        self.subs
            .iter()
            .filter(|s| s.cycle_len > 1)
            .map(|s| s.count)
            .sum()
    }

    /// Number of chunks that move (the positions on cycles of length > 1).
    pub fn moved_chunks(&self) -> u64 {
        self.subs
            .iter()
            .filter(|s| s.cycle_len > 1)
            .map(|s| s.count * s.cycle_len)
            .sum()
    }

    /// Every leader with its cycle length, subproblem by subproblem.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.subs
            .iter()
            .flat_map(|s| s.leaders(0, s.count).map(move |l| (l, s.cycle_len)))
    }
}

fn distinct_primes(x: u64) -> Vec<u64> {
    factor(x).into_iter().map(|(p, _)| p).collect()
}

fn prime_data(q: u64, n: u64, p: u64, e: u32) -> PrimeData {
    let pe = p.pow(e);
    let cofactor = q / pe;
    if p == 2 {
        // n = (-1)^s * 5^t mod 2^f; the sign's period, then the 5-part's order per power
        let sign = n % 4 == 3;
        let mut k = vec![1u64; e as usize + 1];
        for f in 2..=e {
            let modulus = 1u64 << f;
            let r = n % modulus;
            let mut x = if sign { (modulus - r) % modulus } else { r };
            let mut ord = 1;
            while x != 1 {
                x = mul_mod(x, x, modulus);
                ord *= 2;
            }
            k[f as usize] = ord;
        }
        return PrimeData {
            p,
            e,
            cofactor,
            gen: 5 % q,
            k,
            k_sign: if sign && e >= 2 { 2 } else { 1 },
        };
    }
    let pm1 = distinct_primes(p - 1);
    let mut with_p = pm1.clone();
    with_p.push(p);
    let mut k = vec![1u64; e as usize + 1];
    let mut pf = 1u64;
    for f in 1..=e {
        pf *= p;
        let order = pf / p * (p - 1);
        k[f as usize] = multiplicative_order(n % pf, pf, order, &with_p);
    }
    let full = pe / p * (p - 1);
    // n itself generates the units mod p^e (and every lower power) when its order is full
    let gen = if k[e as usize] == full {
        n
    } else {
        primitive_root(p, e, &pm1) % q
    };
    PrimeData {
        p,
        e,
        cofactor,
        gen,
        k,
        k_sign: 1,
    }
}

/// The leader box of the subproblem with `q' = prod p_i^f_i`.
fn subproblem(q: u64, primes: &[PrimeData], f: &[u32]) -> Subproblem {
    // (term, group order N, period K, multiplier), in the theorem's order
    let mut theory: Vec<(usize, u64, u64, u64)> = Vec::new();
    let mut init = Vec::with_capacity(primes.len());
    let mut divisor = 1u64;
    for (i, (pd, &fi)) in primes.iter().zip(f).enumerate() {
        let scale = pd.p.pow(pd.e - fi);
        divisor *= scale;
        init.push(mul_mod(scale, pd.cofactor, q));
        if fi == 0 {
            continue;
        }
        if pd.p == 2 {
            if fi >= 2 {
                theory.push((i, 2, pd.k_sign, q - 1));
                theory.push((i, 1u64 << (fi - 2), pd.k[fi as usize], pd.gen));
            }
        } else {
            let pf = pd.p.pow(fi);
            theory.push((i, pf / pd.p * (pd.p - 1), pd.k[fi as usize], pd.gen));
        }
    }
    let mut len = 1u64;
    let mut count = 1u64;
    let mut axes = Vec::new();
    for &(term, big_n, k, mult) in &theory {
        let l = gcd(len, k);
        len = lcm(len, k);
        let range = big_n / k * l;
        count *= range;
        if range > 1 {
            axes.push(Axis { term, mult, range });
        }
    }
    let base = init.iter().fold(0u64, |s, &t| add_mod(s, t, q));
    Subproblem {
        divisor,
        cycle_len: len,
        count,
        q,
        init,
        base,
        axes,
    }
}
