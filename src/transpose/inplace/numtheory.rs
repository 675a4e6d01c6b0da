//! Number theory for the cycle structure of `k -> k*n mod q`: modular products and powers in
//! 128-bit intermediates (no 64-bit overflow for any `q < 2^64`), prime factorization
//! (Miller-Rabin with the deterministic 64-bit bases, then Pollard-Brent rho), multiplicative
//! orders from a factorization of the group order, and primitive roots of odd prime powers.

/// `a * b mod q` (`q > 0`), exact for all 64-bit inputs.
#[inline]
pub(crate) fn mul_mod(a: u64, b: u64, q: u64) -> u64 {
    ((a as u128 * b as u128) % q as u128) as u64
}

/// `a + b mod q` for `a, b < q`, without overflowing 64 bits.
#[inline]
pub(crate) fn add_mod(a: u64, b: u64, q: u64) -> u64 {
    if a >= q - b {
        a - (q - b)
    } else {
        a + b
    }
}

/// `a - b mod q` for `a, b < q`.
#[inline]
pub(crate) fn sub_mod(a: u64, b: u64, q: u64) -> u64 {
    if a >= b {
        a - b
    } else {
        q - (b - a)
    }
}

/// `base^exp mod q` by binary exponentiation (`q > 0`; `x^0 = 1 mod q`).
pub(crate) fn pow_mod(base: u64, mut exp: u64, q: u64) -> u64 {
    if q == 1 {
        return 0;
    }
    let mut b = base % q;
    let mut r = 1u64;
    while exp > 0 {
        if exp & 1 == 1 {
            r = mul_mod(r, b, q);
        }
        b = mul_mod(b, b, q);
        exp >>= 1;
    }
    r
}

/// Greatest common divisor (`gcd(a, 0) = a`).
pub(crate) fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Least common multiple of two positive integers whose lcm fits in 64 bits (always true
/// here: every lcm taken divides a group order smaller than `q`).
pub(crate) fn lcm(a: u64, b: u64) -> u64 {
    a / gcd(a, b) * b
}

/// Deterministic primality test for 64-bit integers (Miller-Rabin with the first twelve prime
/// bases, which is exact below 3.3e24).
pub(crate) fn is_prime(n: u64) -> bool {
    const BASES: [u64; 12] = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37];
    if n < 2 {
        return false;
    }
    for &p in &BASES {
        if n.is_multiple_of(p) {
            return n == p;
        }
    }
    let s = (n - 1).trailing_zeros();
    let d = (n - 1) >> s;
    'bases: for &a in &BASES {
        let mut x = pow_mod(a, d, n);
        if x == 1 || x == n - 1 {
            continue;
        }
        for _ in 1..s {
            x = mul_mod(x, x, n);
            if x == n - 1 {
                continue 'bases;
            }
        }
        return false;
    }
    true
}

/// A non-trivial factor of the odd composite `n` (Pollard's rho with Brent's cycle finding
/// and batched gcds; retries with another polynomial on failure).
fn rho(n: u64) -> u64 {
    let mut c = 1u64;
    loop {
        let f = |x: u64| add_mod(mul_mod(x, x, n), c, n);
        let (mut y, mut r, mut g, mut acc) = (2u64, 1u64, 1u64, 1u64);
        let (mut x, mut saved) = (y, y);
        const BATCH: u64 = 64;
        while g == 1 {
            x = y;
            for _ in 0..r {
                y = f(y);
            }
            let mut k = 0;
            while k < r && g == 1 {
                saved = y;
                for _ in 0..BATCH.min(r - k) {
                    y = f(y);
                    acc = mul_mod(acc, x.abs_diff(y), n);
                }
                g = gcd(acc, n);
                k += BATCH;
            }
            r *= 2;
        }
        if g == n {
            // The batch overshot: step one at a time from the saved point.
            loop {
                saved = f(saved);
                g = gcd(x.abs_diff(saved), n);
                if g > 1 {
                    break;
                }
            }
        }
        if g != n {
            return g;
        }
        c += 1;
    }
}

/// Prime factorization `[(p, e)]`, primes ascending; `factor(1)` is empty.
pub(crate) fn factor(n: u64) -> Vec<(u64, u32)> {
    let mut primes = Vec::new();
    let mut n = n;
    for p in [2u64, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37] {
        while n.is_multiple_of(p) {
            primes.push(p);
            n /= p;
        }
    }
    let mut stack = vec![n];
    while let Some(x) = stack.pop() {
        if x == 1 {
            continue;
        }
        if is_prime(x) {
            primes.push(x);
        } else {
            let d = rho(x);
            stack.push(d);
            stack.push(x / d);
        }
    }
    primes.sort_unstable();
    let mut out: Vec<(u64, u32)> = Vec::new();
    for p in primes {
        match out.last_mut() {
            Some((q, e)) if *q == p => *e += 1,
            _ => out.push((p, 1)),
        }
    }
    out
}

/// The multiplicative order of `a` modulo `modulus`, given the distinct primes dividing the
/// group order `order` (a multiple of the answer): starts from `order` and divides out one
/// prime at a time while the power stays 1 (the paper's Algorithm 6).
pub(crate) fn multiplicative_order(a: u64, modulus: u64, order: u64, primes: &[u64]) -> u64 {
    if modulus == 1 {
        return 1;
    }
    let mut x = order;
    for &r in primes {
        while x.is_multiple_of(r) && pow_mod(a, x / r, modulus) == 1 {
            x /= r;
        }
    }
    x
}

/// The least primitive root `g` of the odd prime `p`, lifted (`g + p`) when needed so that it
/// generates the units modulo every power `p^f`, `f <= e` (the paper's Algorithm 7).
/// `pm1_primes` are the distinct primes dividing `p - 1`.
pub(crate) fn primitive_root(p: u64, e: u32, pm1_primes: &[u64]) -> u64 {
    let mut g = 2u64;
    loop {
        if pm1_primes.iter().all(|&r| pow_mod(g, (p - 1) / r, p) != 1) {
            break;
        }
        g += 1;
    }
    if e >= 2 {
        let p2 = p * p; // p^2 divides q < 2^64, so it fits
        if pow_mod(g, p - 1, p2) == 1 {
            g += p;
        }
    }
    g
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inplace_factor_small_and_large() {
        for n in 1..2000u64 {
            let f = factor(n);
            assert_eq!(f.iter().map(|&(p, e)| p.pow(e)).product::<u64>(), n);
            assert!(f.iter().all(|&(p, _)| is_prime(p)));
        }
        let big = 1_000_000_007u64 * 998_244_353;
        assert_eq!(factor(big), vec![(998_244_353, 1), (1_000_000_007, 1)]);
        assert_eq!(
            factor(u64::MAX),
            vec![
                (3, 1),
                (5, 1),
                (17, 1),
                (257, 1),
                (641, 1),
                (65537, 1),
                (6700417, 1)
            ]
        );
        assert!(is_prime(18446744073709551557));
    }

    #[test]
    fn inplace_orders_and_roots() {
        // the paper's example: 3 is a primitive root of 7^3
        let g = primitive_root(7, 3, &[2, 3]);
        assert_eq!(g, 3);
        assert_eq!(multiplicative_order(g, 343, 294, &[2, 3, 7]), 294);
        assert_eq!(multiplicative_order(227, 343, 294, &[2, 3, 7]), 42);
        // the returned root generates the units modulo 487^2 too (with or without the lift)
        let g = primitive_root(487, 2, &[2, 3]);
        assert_eq!(
            multiplicative_order(g, 487 * 487, 486 * 487, &[2, 3, 487]),
            486 * 487
        );
        assert_eq!(mul_mod(u64::MAX - 1, u64::MAX - 2, u64::MAX), 2);
        assert_eq!(
            add_mod(u64::MAX - 2, u64::MAX - 3, u64::MAX - 1),
            u64::MAX - 4
        );
    }
}
