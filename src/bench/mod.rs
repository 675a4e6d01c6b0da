//! Benchmark drivers behind `ttgt bench`: each measurement is reported beside a reference
//! measured in the same run (a memory copy of the same bytes at the same thread count).

mod contract;
#[cfg(feature = "cuda")]
pub mod cuda;
mod inplace;
mod networks;
#[cfg(feature = "hptt")]
mod peer_hptt;
mod provenance;
mod qc;
mod qc_candidates;
mod transpose;

pub use crate::cases::{all_perms, parse_ttc, TransposeCase, TTC_TSV};
pub use contract::{
    bench_contract, parse_tccg, ContractBenchOptions, ContractCase, ContractResult, TimedCandidate,
    TCCG_TSV,
};
pub use inplace::{bench_inplace, inplace_cases, InPlaceBenchOptions, InPlaceCase, InPlaceResult};
pub use networks::{
    bench_network, parse_networks, NetworkBenchOptions, NetworkCase, NetworkResult, NETWORKS_TSV,
};
pub use provenance::{Provenance, Samples};
pub use qc::{bench_qc, parse_qc, MachineLimits, QcBenchOptions, QcCase, QcResult, QcRun, QC_TSV};
pub use qc_candidates::qc_candidates;
pub use transpose::{bench_transpose, TransposeBenchOptions, TransposeResult};
