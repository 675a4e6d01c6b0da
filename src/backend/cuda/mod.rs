//! The CUDA backend. Planning ([`ttlg`], [`contract`]) and the kernel table ([`kernels`])
//! need neither a GPU nor cudarc and are always built; the device layer (`device`, feature
//! `cuda`) runs the plans through cudarc and cuBLAS; the emulator (`emu`, feature
//! `cuda-emu`) runs the same kernel sources on the CPU.

pub mod contract;
#[cfg(feature = "cuda")]
pub mod device;
#[cfg(feature = "cuda-emu")]
pub mod emu;
pub mod gemm_call;
pub mod kernels;
pub mod ttlg;
