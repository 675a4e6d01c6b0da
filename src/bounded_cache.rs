//! A bounded map for the plan caches: looked up by a hash and an equality test on borrowed
//! parts of the key, so a hit allocates nothing; the oldest entry is dropped first when full.

use std::collections::VecDeque;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use rustc_hash::{FxHashMap, FxHasher};

/// The hash [`BoundedCache`] files an entry under: any value's Fx hash (a tuple of borrowed
/// parts hashes like the tuple of their owned forms).
///
/// ```
/// use ttgt::bounded_cache::hash_of;
/// assert_eq!(hash_of(&("ab", [1usize, 2].as_slice())), hash_of(&(String::from("ab"), vec![1usize, 2])));
/// ```
pub fn hash_of<K: Hash + ?Sized>(key: &K) -> u64 {
    let mut h = FxHasher::default();
    key.hash(&mut h);
    h.finish()
}

/// Entries under their hash (a bucket holds them oldest first), and the insertion order.
///
/// ```
/// use ttgt::bounded_cache::{hash_of, BoundedCache};
/// let mut c = BoundedCache::new(2);
/// for k in ["a", "b", "c"] {
///     c.insert(hash_of(k), k.to_string(), k.len());
/// }
/// assert_eq!(c.len(), 2);
/// assert_eq!(c.get(hash_of("a"), |k| k == "a"), None); // the oldest went first
/// assert_eq!(c.get(hash_of("c"), |k| k == "c"), Some(&1));
/// ```
#[derive(Debug)]
pub struct BoundedCache<K, V> {
    map: FxHashMap<u64, Vec<(K, V)>>,
    order: VecDeque<u64>,
    capacity: usize,
}

impl<K, V> BoundedCache<K, V> {
    /// An empty cache that keeps at most `capacity` entries (at least one).
    pub fn new(capacity: usize) -> Self {
        BoundedCache {
            map: FxHashMap::default(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether the cache holds nothing.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The value filed under `hash` whose key satisfies `matches`.
    pub fn get(&self, hash: u64, matches: impl Fn(&K) -> bool) -> Option<&V> {
        self.map
            .get(&hash)?
            .iter()
            .find(|(k, _)| matches(k))
            .map(|(_, v)| v)
    }

    /// Files `value` under `hash` (the caller has checked that no equal key is present),
    /// dropping the oldest entry when the cache is full.
    pub fn insert(&mut self, hash: u64, key: K, value: V) {
        if self.order.len() >= self.capacity {
            if let Some(old) = self.order.pop_front() {
                if let Some(bucket) = self.map.get_mut(&old) {
                    bucket.remove(0);
                    if bucket.is_empty() {
                        self.map.remove(&old);
                    }
                }
            }
        }
        self.map.entry(hash).or_default().push((key, value));
        self.order.push_back(hash);
    }

    /// Puts `value` in place of the value filed under `hash` whose key satisfies `matches`
    /// (its age unchanged); nothing happens when there is none (dropped meanwhile).
    ///
    /// ```
    /// use ttgt::bounded_cache::{hash_of, BoundedCache};
    /// let mut c = BoundedCache::new(2);
    /// c.insert(hash_of("a"), "a", 1);
    /// c.replace(hash_of("a"), |k| *k == "a", 2);
    /// c.replace(hash_of("b"), |k| *k == "b", 3);
    /// assert_eq!((c.get(hash_of("a"), |k| *k == "a"), c.len()), (Some(&2), 1));
    /// ```
    pub fn replace(&mut self, hash: u64, matches: impl Fn(&K) -> bool, value: V) {
        let found = self
            .map
            .get_mut(&hash)
            .and_then(|b| b.iter_mut().find(|(k, _)| matches(k)));
        if let Some((_, v)) = found {
            *v = value;
        }
    }

    /// Drops every entry.
    pub fn clear(&mut self) {
        self.map.clear();
        self.order.clear();
    }
}

/// The value filed under `hash` whose key satisfies `matches`, or the one `make` builds (with
/// the lock released, so a long planning blocks no other lookup), filed then.
///
/// ```
/// use std::sync::Mutex;
/// use ttgt::bounded_cache::{cached, hash_of, BoundedCache};
/// let c = Mutex::new(BoundedCache::new(8));
/// let v: Result<usize, ()> = cached(&c, hash_of("k"), |k: &String| k == "k", || Ok(("k".into(), 5)));
/// assert_eq!(v, Ok(5));
/// let again: Result<usize, ()> = cached(&c, hash_of("k"), |k: &String| k == "k", || Err(()));
/// assert_eq!(again, Ok(5));
/// ```
pub fn cached<K, V: Clone, E>(
    cache: &Mutex<BoundedCache<K, V>>,
    hash: u64,
    matches: impl Fn(&K) -> bool,
    make: impl FnOnce() -> Result<(K, V), E>,
) -> Result<V, E> {
    let lock = || cache.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(v) = lock().get(hash, &matches) {
        return Ok(v.clone());
    }
    let (key, value) = make()?;
    let mut c = lock();
    if c.get(hash, &matches).is_none() {
        c.insert(hash, key, value.clone());
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colliding_hashes_keep_their_entries_apart_and_age_in_order() {
        let mut c = BoundedCache::new(3);
        c.insert(7, "x", 1);
        c.insert(7, "y", 2);
        c.insert(8, "z", 3);
        assert_eq!(c.get(7, |k| *k == "y"), Some(&2));
        assert_eq!(c.get(7, |k| *k == "w"), None);
        c.insert(9, "w", 4);
        assert_eq!(c.get(7, |k| *k == "x"), None);
        assert_eq!(c.get(7, |k| *k == "y"), Some(&2));
        c.insert(10, "v", 5);
        c.insert(11, "u", 6);
        assert_eq!(c.len(), 3);
        assert!(!c.map.contains_key(&7));
        c.clear();
        assert!(c.is_empty());
    }
}
