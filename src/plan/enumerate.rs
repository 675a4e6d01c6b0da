//! Every candidate of a two-operand contraction, priced and sorted: index orders taken from
//! C's and the operands' strides, packed group orders `[batch|M|K]` or `[batch|K|M]` etc.
//! (and, where only part of M or N fuses in C, `[batch|loops|K|M]`: the loops outermost, so
//! that each call's block is one dense run),
//! C written directly, through a temporary, in place or block by block, each GEMM library,
//! serial or parallel independent loops, and GETT when our own library is asked for.

use rustc_hash::FxHashSet as HashSet;

use super::candidate::{problem_bytes, Candidate, GettRun, Labels, Problem, StepCosts, TiledC};
use super::groups::{by_stride, packed_layout, stride_of};
use super::options::{PlanOptions, DEFAULT_TILE_BYTES, WIDE_TILE_BYTES};
use super::price::{
    dense_order, fused_suffix, geometry, operand_layout, Geometry, Pricer, EXECUTE_CALL_SECONDS,
    RESIDENT_BLOCK_BYTES,
};
use crate::einsum::Label;
use crate::error::{Error, Result};
use crate::model::{
    gett_blocking, gett_depth, gett_orient, gett_simd_available, gett_work, profile_for,
    GemmLibrary, GettIndex, Profile,
};
use crate::tensor::Layout;

/// How much of the candidate space an enumeration covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every candidate.
    Full,
    /// The groups' first orders only (M and N in C's order, K in A's) with every choice of
    /// packs, write-back, library and parallelism, and no tiled write-backs: fewer candidates
    /// where a group has several orders, for work too small to repay a full search on its
    /// first call.
    Quick,
}

/// The first of `opts` alone.
fn first(mut opts: Vec<Vec<Label>>) -> Vec<Vec<Label>> {
    opts.truncate(1);
    opts
}

/// Result of an enumeration: candidates sorted by predicted time, and how many the
/// workspace limit excluded (with the best excluded one).
pub(crate) struct Enumeration {
    pub candidates: Vec<Candidate>,
    pub excluded: usize,
    pub best_excluded: Option<Candidate>,
}

fn dedup(opts: Vec<Vec<Label>>) -> Vec<Vec<Label>> {
    let mut out: Vec<Vec<Label>> = Vec::new();
    for o in opts {
        if !out.contains(&o) {
            out.push(o);
        }
    }
    out
}

/// How many block shapes a tiled enumeration tries per choice of group orders and packs.
const MAX_BLOCK_SETS: usize = 8;

/// Most candidates an enumeration makes room for before it starts (the vector grows past it
/// as needed): 4096 candidates are a few megabytes of address space, of which only the
/// pages the candidates fill are touched.
const MAX_RESERVED_CANDIDATES: usize = 4096;

/// The sets of free labels (M and N) whose values make the blocks of a tiled write-back: a
/// set qualifies when the other labels' extents multiply to at most `max_elems` and dropping
/// any label from it would exceed that (the largest blocks that fit). All subsets are tried
/// for up to 12 free labels, else only leading parts of `free`; the `MAX_BLOCK_SETS` with
/// the largest blocks are kept (fewer, longer GEMM calls), labels in `free`'s order.
fn block_sets(free: &[Label], ext: &dyn Fn(Label) -> usize, max_elems: usize) -> Vec<Vec<Label>> {
    let block = |mask: u64| -> usize {
        free.iter()
            .enumerate()
            .filter(|(i, _)| mask & (1 << i) == 0)
            .map(|(_, &l)| ext(l))
            .fold(1usize, |a, b| a.saturating_mul(b))
    };
    let fits = |mask: u64| block(mask) <= max_elems;
    let maximal = |mask: u64| {
        fits(mask) && (0..free.len()).all(|b| mask & (1 << b) == 0 || !fits(mask & !(1 << b)))
    };
    let masks: Vec<u64> = if free.len() <= 12 {
        (0..1u64 << free.len()).filter(|&m| maximal(m)).collect()
    } else {
        (0..=free.len())
            .map(|i| (1u64 << i) - 1)
            .filter(|&m| fits(m))
            .take(1)
            .collect()
    };
    let mut ranked: Vec<(usize, u64)> = masks.into_iter().map(|m| (block(m), m)).collect();
    ranked.sort_by_key(|&(b, m)| (std::cmp::Reverse(b), m));
    ranked
        .into_iter()
        .take(MAX_BLOCK_SETS)
        .map(|(_, m)| {
            free.iter()
                .enumerate()
                .filter(|(i, _)| m & (1 << i) != 0)
                .map(|(_, &l)| l)
                .collect()
        })
        .collect()
}

/// What the tiled candidates of one choice of group orders and packs share.
struct TileSpace<'a> {
    /// Batch, M, N and K labels in the orders of this choice.
    groups: [&'a [Label]; 4],
    /// A's and B's packed orders (`None`: used as they are).
    packs: [&'a Option<Labels>; 2],
    /// A's and B's layouts as the GEMM sees them (packed or as they are).
    layouts: [&'a Layout; 2],
    /// The sets of M and N labels whose values are blocks ([`tile_block_sets`]).
    sets: &'a [Vec<Label>],
    libs: &'a [GemmLibrary],
    tile_bytes: usize,
    prepare_cost: f64,
    sums_bytes: usize,
    limit: usize,
}

/// Identity of a tiled candidate before the library and parallelism choices: packs, block
/// labels, block order, GEMM groups, inner loops.
type TiledKey = ([Option<Labels>; 2], Labels, Labels, [Labels; 3], Labels);

/// The sets of M and N labels (in the orders `mo`, `no`) whose values are the blocks of tiled write-backs:
/// those of [`block_sets`] under `tile_bytes`, and under `wide_bytes` too when given; none
/// when C is at most four blocks of `tile_bytes` (no tiled candidate is offered then). They
/// depend on the M and N orders only, so they are found once per choice of orders, not for
/// every choice of packs.
fn tile_block_sets(
    pb: &Problem<'_>,
    [mo, no]: [&[Label]; 2],
    tile_bytes: usize,
    wide_bytes: Option<usize>,
) -> Vec<Vec<Label>> {
    let es = pb.dtype.size_bytes();
    let c_len = pb.c.len();
    if c_len == 0 || c_len.saturating_mul(es) <= tile_bytes.saturating_mul(4) {
        return Vec::new();
    }
    let ext = |l: Label| pb.bound.extent(l);
    let free = [mo, no].concat();
    let mut sets = block_sets(&free, &ext, tile_bytes / es);
    if let Some(w) = wide_bytes {
        for s in block_sets(&free, &ext, w / es) {
            if !sets.contains(&s) {
                sets.push(s);
            }
        }
    }
    sets
}

/// Adds the tiled write-back candidates of one choice of group orders and packs: blocks are
/// the values of every batch label and of a set of M and N labels from [`block_sets`] (a
/// block of C holds at most `tile_bytes`, or the largest blocks under `wide_bytes` too, and
/// blocks under 1/64 of `tile_bytes` are skipped), each with the block buffer ordered `[M|N]`
/// or `[N|M]`. Offered only when C is larger than four blocks.
fn tiled_candidates(
    pricer: &mut Pricer<'_>,
    sp: &TileSpace<'_>,
    seen: &mut HashSet<TiledKey>,
    all: &mut Vec<Candidate>,
    excluded: &mut Vec<Candidate>,
) -> Result<()> {
    let pb = pricer.pb;
    let threads = pricer.threads;
    let out = pb.bound.output();
    let ext = |l: Label| pb.bound.extent(l);
    let es = pb.dtype.size_bytes();
    let [batch, mo, no, ko] = sp.groups;
    let [ac, bc] = sp.packs;
    let (pa, pbp) = (&pb.preps[0], &pb.preps[1]);
    // no block sets: C is too small to tile (`tile_block_sets`)
    if sp.sets.is_empty() {
        return Ok(());
    }
    let prod = |ls: &[Label]| ls.iter().map(|&l| ext(l)).product::<usize>();
    let [la, lb] = sp.layouts;
    let mut costs = StepCosts {
        prepare: sp.prepare_cost,
        ..Default::default()
    };
    if let Some(o) = ac {
        costs.pack_a = pricer.copy_cost(0, o)?;
    }
    if let Some(o) = bc {
        costs.pack_b = pricer.copy_cost(1, o)?;
    }
    let packs_bytes = es
        * (ac.as_ref().map_or(0, |_| pa.prepared.len())
            + bc.as_ref().map_or(0, |_| pbp.prepared.len()));
    for set in sp.sets {
        let rest = |g: &[Label]| -> Vec<Label> {
            g.iter().copied().filter(|l| !set.contains(l)).collect()
        };
        let (mr, nr) = (&rest(mo)[..], &rest(no)[..]);
        let block_len = prod(mr) * prod(nr);
        // Tiny blocks cost a GEMM call and a transposition call each.
        if block_len * es < sp.tile_bytes / 64 {
            continue;
        }
        let tiles: Vec<Label> = batch.iter().chain(set).copied().collect();
        let tiles: Labels = by_stride(&tiles, out, pb.c).into();
        let blocks = prod(&tiles);
        for order in [[mr, nr].concat(), [nr, mr].concat()] {
            let order: Labels = order.into();
            let lt = packed_layout(&order, out, ext)?;
            // the block buffer stays in cache when it is at most half the L2
            let resident = block_len * es <= RESIDENT_BLOCK_BYTES;
            let Geometry {
                gm,
                gn,
                gk,
                free: inner,
                reduce,
                mnk: (m, n, k),
                call,
            } = geometry(
                pb,
                [mr, nr, ko],
                [la, lb, &lt],
                &tiles,
                resident,
                &pricer.profile,
            );
            let [gm, gn, gk, inner, reduce]: [Labels; 5] =
                [gm.into(), gn.into(), gk.into(), inner.into(), reduce.into()];
            let key = (
                [ac.clone(), bc.clone()],
                tiles.clone(),
                order.clone(),
                [gm.clone(), gn.clone(), gk.clone()],
                inner.clone(),
            );
            if !seen.insert(key) {
                continue;
            }
            let independent = prod(&inner);
            let reductions = prod(&reduce);
            let calls = blocks * independent * reductions.max(1);
            let libs = if call.skinny() {
                &sp.libs[..1]
            } else {
                sp.libs
            };
            for &library in libs {
                let par_opts: &[bool] = if threads > 1 && blocks > 1 && library == GemmLibrary::Gemm
                {
                    &[false, true]
                } else {
                    &[false]
                };
                for &parallel in par_opts {
                    let gt = if parallel { 1 } else { threads };
                    let (plan, per_block) = pricer.tile_plan(&tiles, &order, gt)?;
                    let per = call.seconds(&pricer.profile, library, pb.dtype, threads, gt);
                    let waves = if parallel {
                        blocks.div_ceil(threads)
                    } else {
                        blocks
                    };
                    let buffers = if parallel { threads.min(blocks) } else { 1 };
                    // each buffer rounded up to whole 64-byte lines, plus one for alignment
                    let workspace = sp.sums_bytes
                        + packs_bytes
                        + buffers * (block_len * es).div_ceil(64) * 64
                        + 64;
                    let c = Candidate {
                        a_pack: ac.clone(),
                        b_pack: bc.clone(),
                        c_temp: None,
                        c_in_place: None,
                        c_tiles: Some(TiledC {
                            loops: tiles.clone(),
                            order: order.clone(),
                            block_len,
                            plan,
                        }),
                        m: gm.clone(),
                        n: gn.clone(),
                        k: gk.clone(),
                        loops: inner.clone(),
                        reduce: reduce.clone(),
                        parallel,
                        library,
                        gemm_threads: gt,
                        gemm_shape: (calls, m, n, k),
                        workspace_bytes: workspace,
                        predicted: StepCosts {
                            gemm: (waves * independent * reductions.max(1)) as f64 * per,
                            write_c: waves as f64 * per_block,
                            ..costs
                        },
                        batch_loops: 0,
                        gett: None,
                        nested: None,
                        skinny: call.skinny(),
                    };
                    if workspace > sp.limit {
                        excluded.push(c);
                    } else {
                        all.push(c);
                    }
                }
            }
        }
    }
    Ok(())
}

/// The GETT candidate: every M, N and K index in the engine's order (from
/// [`gett_orient`]), batch indices as the engine's outer loop; priced as
/// [`crate::model::gett_seconds`] does, its work computed once for the price and the tile mode.
fn gett_candidate(
    pb: &Problem<'_>,
    threads: usize,
    p: &Profile,
    prepare_cost: f64,
    sums_bytes: usize,
) -> Candidate {
    let (pa, pbp) = (&pb.preps[0], &pb.preps[1]);
    let out = pb.bound.output();
    let ext = |l: Label| pb.bound.extent(l);
    let sa = |l| stride_of(l, &pa.kept, &pa.prepared);
    let sb = |l| stride_of(l, &pbp.kept, &pbp.prepared);
    let sc = |l| stride_of(l, out, pb.c);
    let idx = |g: &[Label], f: &dyn Fn(Label) -> [isize; 2]| -> Vec<GettIndex> {
        g.iter().map(|&l| (ext(l), f(l))).collect()
    };
    let m = idx(&pb.m, &|l| [sa(l), sc(l)]);
    let n = idx(&pb.n, &|l| [sb(l), sc(l)]);
    let k = idx(&pb.k, &|l| [sa(l), sb(l)]);
    let o = gett_orient(&m, &n, &k);
    let (rows, cols) = if o.swap {
        (&pb.n, &pb.m)
    } else {
        (&pb.m, &pb.n)
    };
    let pick = |g: &[Label], order: &[usize]| -> Labels { order.iter().map(|&i| g[i]).collect() };
    let prod = |g: &[Label]| g.iter().map(|&l| ext(l)).product::<usize>();
    let batches = prod(&pb.batch);
    let (ms, ns, ks) = (prod(&pb.m), prod(&pb.n), prod(&pb.k));
    let blk = gett_blocking(pb.dtype);
    let es = pb.dtype.size_bytes();
    let (mm, nn) = if o.swap { (ns, ms) } else { (ms, ns) };
    // per thread: an A block, a B block and a tile
    let workspace = sums_bytes
        + threads
            * es
            * (blk.mc.min(mm.max(1)) * gett_depth(ks, blk.kc)
                + blk.nc.min(nn.max(1)) * gett_depth(ks, blk.kc)
                + blk.mr * blk.nr)
        + 64 * threads;
    let work = gett_work(pb.dtype, threads, batches, &m, &n, &k, false);
    let gemm = work.seconds(p, pb.dtype, threads, batches);
    let direct_tiles = work.scattered == 0.0;
    Candidate {
        a_pack: None,
        b_pack: None,
        c_temp: None,
        c_in_place: None,
        c_tiles: None,
        m: pick(rows, &o.m),
        n: pick(cols, &o.n),
        k: pick(&pb.k, &o.k),
        loops: pb.batch.as_slice().into(),
        reduce: Labels::from([]),
        parallel: threads > 1,
        library: GemmLibrary::Native,
        gemm_threads: threads,
        gemm_shape: (batches, mm, nn, ks),
        workspace_bytes: workspace,
        predicted: StepCosts {
            prepare: prepare_cost,
            gemm,
            ..Default::default()
        },
        batch_loops: pb.batch.len(),
        nested: None,
        skinny: false,
        gett: Some(GettRun {
            swap: o.swap,
            direct_tiles,
        }),
    }
}

/// Lists every candidate of a two-operand contraction under `options`, priced and sorted.
///
/// `loops`: the nested-loop candidate ([`super::loops::loops_candidate`]), priced beside the
/// others when there is one.
pub(crate) fn enumerate(
    pb: &Problem<'_>,
    options: &PlanOptions,
    loops: Option<Candidate>,
    scope: Scope,
) -> Result<Enumeration> {
    let threads = crate::threads::resolve(options.threads)?;
    let (pa, pbp) = (&pb.preps[0], &pb.preps[1]);
    let out = pb.bound.output();
    let ext = |l| pb.bound.extent(l);
    let es = pb.dtype.size_bytes();
    let libs: Vec<GemmLibrary> = match options.library {
        Some(l) => vec![l],
        None => GemmLibrary::ALL.to_vec(),
    };
    let m_opts = dedup(vec![
        by_stride(&pb.m, out, pb.c),
        by_stride(&pb.m, &pa.kept, &pa.prepared),
    ]);
    let n_opts = dedup(vec![
        by_stride(&pb.n, out, pb.c),
        by_stride(&pb.n, &pbp.kept, &pbp.prepared),
    ]);
    let k_opts = dedup(vec![
        by_stride(&pb.k, &pa.kept, &pa.prepared),
        by_stride(&pb.k, &pbp.kept, &pbp.prepared),
    ]);
    let (m_opts, n_opts, k_opts) = match scope {
        Scope::Full => (m_opts, n_opts, k_opts),
        Scope::Quick => (first(m_opts), first(n_opts), first(k_opts)),
    };
    let batch = by_stride(&pb.batch, out, pb.c);
    let mut pricer = Pricer::new(
        pb,
        threads,
        profile_for(problem_bytes(pb.preps, pb.c, pb.dtype)),
    );
    // In-place write-backs are slower than out-of-place ones and their planning searches
    // swap sequences: offered only when the limit leaves no room for a temporary C.
    let c_phys = dense_order(out, pb.c).filter(|_| {
        options
            .workspace_limit
            .is_some_and(|l| l < pb.c.len() * pb.dtype.size_bytes())
    });
    let sums_bytes: usize = pb
        .preps
        .iter()
        .filter(|p| !p.summed.is_empty())
        .map(|p| p.prepared.len() * es)
        .sum();
    let prepare_cost: f64 = EXECUTE_CALL_SECONDS
        + pb.preps
            .iter()
            .filter(|p| !p.summed.is_empty())
            .map(|p| (p.layout.len() * es) as f64 / (pricer.profile.copy_gbps(threads) * 1e9))
            .sum::<f64>();
    let limit = options.workspace_limit.unwrap_or(usize::MAX);
    if sums_bytes > limit {
        return Err(Error::Workspace {
            needed: sums_bytes,
            limit,
        });
    }

    let tile_bytes = options.tile_bytes.unwrap_or(DEFAULT_TILE_BYTES).max(1);
    let wide_bytes = options.tile_bytes.is_none().then_some(WIDE_TILE_BYTES);
    let mut seen_tiles = HashSet::default();
    let mut seen = HashSet::default();
    // room for every untiled candidate at once: grown by doubling, the vector of hundreds
    // of candidates was copied into fresh pages several times
    let c_count = if c_phys.is_some() { 5 } else { 3 };
    let par = if threads > 1 { 2 } else { 1 };
    let bound = m_opts.len() * n_opts.len() * k_opts.len() * 16 * c_count * libs.len() * par;
    let mut all: Vec<Candidate> = Vec::with_capacity(1 + bound.min(MAX_RESERVED_CANDIDATES));
    all.extend(loops);
    let mut excluded = Vec::new();
    for mo in &m_opts {
        for no in &n_opts {
            for ko in &k_opts {
                let order = |g: [&[Label]; 3]| -> Option<Labels> { Some(g.concat().into()) };
                let mut a_choices = vec![None, order([&batch, mo, ko]), order([&batch, ko, mo])];
                a_choices.extend(loops_outside(&batch, mo, ko, out, pb.c).map(Some));
                let mut b_choices = vec![None, order([&batch, ko, no]), order([&batch, no, ko])];
                b_choices.extend(loops_outside(&batch, no, ko, out, pb.c).map(Some));
                let mn: Labels = [&batch[..], mo, no].concat().into();
                let nm: Labels = [&batch[..], no, mo].concat().into();
                let mut c_choices = vec![
                    (None, false),
                    (Some(mn.clone()), false),
                    (Some(nm.clone()), false),
                ];
                if c_phys.is_some() {
                    c_choices.push((Some(mn), true));
                    c_choices.push((Some(nm), true));
                }
                let tile_sets = match scope {
                    Scope::Full => tile_block_sets(pb, [mo, no], tile_bytes, wide_bytes),
                    Scope::Quick => Vec::new(),
                };
                // the layouts the GEMM sees, once per choice
                let c_layouts = c_choices
                    .iter()
                    .map(|(cc, _)| match cc {
                        Some(o) => packed_layout(o, out, ext),
                        None => Ok(pb.c.clone()),
                    })
                    .collect::<Result<Vec<_>>>()?;
                for ac in &a_choices {
                    let la = operand_layout(ac, pa, pb)?;
                    for bc in &b_choices {
                        let lb = operand_layout(bc, pbp, pb)?;
                        tiled_candidates(
                            &mut pricer,
                            &TileSpace {
                                groups: [&batch, mo, no, ko],
                                packs: [ac, bc],
                                layouts: [&la, &lb],
                                sets: &tile_sets,
                                libs: &libs,
                                tile_bytes,
                                prepare_cost,
                                sums_bytes,
                                limit,
                            },
                            &mut seen_tiles,
                            &mut all,
                            &mut excluded,
                        )?;
                        for ((cc, in_place), lc) in c_choices.iter().zip(&c_layouts) {
                            let Geometry {
                                gm,
                                gn,
                                gk,
                                free,
                                reduce,
                                mnk: (m, n, k),
                                call,
                            } = geometry(
                                pb,
                                [mo, no, ko],
                                [&la, &lb, lc],
                                &batch,
                                false,
                                &pricer.profile,
                            );
                            let mut loops = batch.clone();
                            loops.extend(free);
                            let [gm, gn, gk, loops, reduce]: [Labels; 5] =
                                [gm.into(), gn.into(), gk.into(), loops.into(), reduce.into()];
                            let ip = match (cc, in_place, &c_phys) {
                                (Some(o), true, Some(phys)) => match pricer.in_place(o, phys)? {
                                    Some(x) => Some(x),
                                    None => continue, // C is already in that order
                                },
                                _ => None,
                            };
                            let key = (
                                ac.clone(),
                                bc.clone(),
                                cc.clone(),
                                *in_place,
                                gm.clone(),
                                gn.clone(),
                                gk.clone(),
                                loops.clone(),
                            );
                            if !seen.insert(key) {
                                continue;
                            }
                            let workspace = sums_bytes
                                + es * (ac.as_ref().map_or(0, |_| pa.prepared.len())
                                    + bc.as_ref().map_or(0, |_| pbp.prepared.len())
                                    + match (cc, &ip) {
                                        (Some(_), None) => pb.c.len(),
                                        _ => 0,
                                    })
                                + ip.as_ref().map_or(0, |(x, _)| {
                                    x.forward.workspace_bytes().max(x.back.workspace_bytes())
                                });
                            let independent: usize = loops.iter().map(|&l| ext(l)).product();
                            let reductions: usize = reduce.iter().map(|&l| ext(l)).product();
                            let mut costs = StepCosts {
                                prepare: prepare_cost,
                                ..Default::default()
                            };
                            if let Some(o) = ac {
                                costs.pack_a = pricer.copy_cost(0, o)?;
                            }
                            if let Some(o) = bc {
                                costs.pack_b = pricer.copy_cost(1, o)?;
                            }
                            match (cc, &ip) {
                                (Some(o), None) => costs.write_c = pricer.copy_cost(2, o)?,
                                (_, Some((_, t))) => costs.write_c = *t,
                                _ => {}
                            }
                            let p = &pricer.profile;
                            let calls = independent * reductions.max(1);
                            let libs = if call.skinny() { &libs[..1] } else { &libs[..] };
                            for &library in libs {
                                let par_opts: &[bool] = if threads > 1
                                    && independent > 1
                                    && library == GemmLibrary::Gemm
                                {
                                    &[false, true]
                                } else {
                                    &[false]
                                };
                                for &parallel in par_opts {
                                    let gt = if parallel { 1 } else { threads };
                                    let per = call.seconds(p, library, pb.dtype, threads, gt);
                                    let waves = if parallel {
                                        independent.div_ceil(threads)
                                    } else {
                                        independent
                                    };
                                    let c = Candidate {
                                        a_pack: ac.clone(),
                                        b_pack: bc.clone(),
                                        c_temp: if ip.is_some() { None } else { cc.clone() },
                                        c_in_place: ip.as_ref().map(|x| Box::new(x.0.clone())),
                                        c_tiles: None,
                                        m: gm.clone(),
                                        n: gn.clone(),
                                        k: gk.clone(),
                                        loops: loops.clone(),
                                        reduce: reduce.clone(),
                                        parallel,
                                        library,
                                        gemm_threads: gt,
                                        gemm_shape: (calls, m, n, k),
                                        workspace_bytes: workspace,
                                        predicted: StepCosts {
                                            gemm: waves as f64 * reductions.max(1) as f64 * per,
                                            ..costs
                                        },
                                        batch_loops: batch.len(),
                                        gett: None,
                                        nested: None,
                                        skinny: call.skinny(),
                                    };
                                    if workspace > limit {
                                        excluded.push(c);
                                    } else {
                                        all.push(c);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    // GETT is offered when our own library is asked for. The automatic choice leaves it
    // out: on the TCCG set its model never ranked it first where its tiles store in place
    // except on tccg-15 to -18 (f64), where it ran 0.8-1.0x as fast as the copy-free loop
    // of GEMM calls it displaced (our kernel trails the `gemm` crate's on GEMM-shaped work),
    // and where tiles are written element by element they touch one page per element when
    // C's other strides are large, which its model does not price (tccg-3 and -7 ran
    // 1.5-3x slower than TTGT).
    if gett_simd_available(pb.dtype) && options.library == Some(GemmLibrary::Native) {
        let c = gett_candidate(pb, threads, &pricer.profile, prepare_cost, sums_bytes);
        if c.workspace_bytes > limit {
            excluded.push(c);
        } else {
            all.push(c);
        }
    }
    let excluded_count = excluded.len();
    let best_excluded = excluded
        .into_iter()
        .min_by(|x, y| by_time(&rank(x), &rank(y)));
    Ok(Enumeration {
        excluded: excluded_count,
        best_excluded,
        candidates: sorted_by_time(all),
    })
}

/// The packed order `[batch|loops|K|F]` of an operand whose free group `free` fuses in C (as
/// given) only in its innermost part `F`: the other free labels become loops around the GEMM
/// calls, and placed outermost they leave each call's block one dense run. In
/// `[batch|K|free]` the rows of a call's block lie the whole loop range apart, often a
/// multiple of 4 KiB, where they share cache sets: such calls ran at a fraction of their
/// speed (`docs/TUNING.md`, "Loops outside a packed operand's K"). `None` when all or none
/// of `free` fuses.
fn loops_outside(
    batch: &[Label],
    free: &[Label],
    k: &[Label],
    out: &[Label],
    c: &Layout,
) -> Option<Labels> {
    let fused = fused_suffix(free, &[(out, c)]);
    if fused.is_empty() || fused.len() == free.len() || k.is_empty() {
        return None;
    }
    let loops = &free[..free.len() - fused.len()];
    Some([batch, loops, k, &fused].concat().into())
}

/// What candidates are ranked by: predicted seconds, then fewer copies.
fn rank(c: &Candidate) -> (f64, usize) {
    (c.predicted.total(), c.copies())
}

fn by_time(x: &(f64, usize), y: &(f64, usize)) -> std::cmp::Ordering {
    x.0.total_cmp(&y.0).then(x.1.cmp(&y.1))
}

/// `v` in the order of [`rank`], ties in their order in `v`. The keys are sorted, not the
/// candidates: a candidate is 656 bytes, and sorting hundreds of them moved each one
/// a dozen times (a tenth of planning time). The order found is then applied in place, a
/// cycle of the permutation at a time: a second vector of hundreds of candidates was a
/// fresh allocation of hundreds of kilobytes whose pages the copy faulted in.
fn sorted_by_time(mut v: Vec<Candidate>) -> Vec<Candidate> {
    let mut keys: Vec<((f64, usize), usize)> =
        v.iter().enumerate().map(|(i, c)| (rank(c), i)).collect();
    keys.sort_by(|x, y| by_time(&x.0, &y.0).then(x.1.cmp(&y.1)));
    // source[i]: where the candidate that belongs at position i is now
    let mut source: Vec<usize> = keys.iter().map(|&(_, i)| i).collect();
    for start in 0..source.len() {
        let mut at = start;
        loop {
            let from = source[at];
            source[at] = at;
            if from == start || from == at {
                break;
            }
            v.swap(at, from);
            at = from;
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(s: &str) -> Vec<Label> {
        s.chars().map(Label::Letter).collect()
    }

    /// The tccg-7 shape: C = e d c b a with extents 48 24 32 32 48; blocks of at most 64 Ki
    /// elements.
    #[test]
    fn block_sets_are_the_largest_blocks_that_fit() {
        let free = labels("ecbad");
        let ext = |l: Label| match l {
            Label::Letter('e') | Label::Letter('a') => 48,
            Label::Letter('d') => 24,
            _ => 32,
        };
        let sets = block_sets(&free, &ext, 1 << 16);
        assert!(!sets.is_empty() && sets.len() <= MAX_BLOCK_SETS);
        let block = |set: &[Label]| -> usize {
            free.iter()
                .filter(|l| !set.contains(l))
                .map(|&l| ext(l))
                .product()
        };
        for set in &sets {
            // fits, and no label can leave the set without the block exceeding the bound
            assert!(block(set) <= 1 << 16, "{set:?}");
            for l in set {
                let smaller: Vec<Label> = set.iter().copied().filter(|x| x != l).collect();
                assert!(block(&smaller) > 1 << 16, "{set:?} is not maximal");
            }
        }
        // the block over b and c (a e d in the block: 55 296 elements) is the largest
        assert_eq!(sets[0], labels("cb"));
        // every set is in `free`'s order and sorted by decreasing block size
        assert!(sets.windows(2).all(|w| block(&w[0]) >= block(&w[1])));
        // a bound below the smallest extent leaves only the full set (1-element blocks)
        assert_eq!(block_sets(&free, &ext, 1), vec![free.clone()]);
    }
}
