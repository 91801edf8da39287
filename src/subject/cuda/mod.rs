//! The CUDA subjects: `kernels/*.cu`, compiled at run time by NVRTC and run
//! through cudarc's driver API. Three layers, as cudarc has: [`nvrtc`] (the
//! compiler), [`device`] (the GPU, its modules and timing; [`launch`], a
//! launch that may overlap the one before it), and one file per
//! op for its launches ([`seqwise_loss`], [`router`], [`shared_expert`],
//! [`moe_combine`]),
//! and cuBLAS as a subject of `shared_expert` ([`shared_expert_cublas`]).
//!
//! Fail closed at every step: a machine without the driver, without a GPU,
//! without NVRTC, or whose kernels do not compile gets an explicit reason
//! (the subject is unavailable, with it); a subject call returns
//! [`SubjectError::Unavailable`](crate::subject::SubjectError) or
//! [`SubjectError::Device`](crate::subject::SubjectError); nothing panics and
//! nothing falls back to another implementation.
//!
//! Both libraries are loaded with dlopen (cudarc's `dynamic-loading`), and
//! cudarc panics when a library it needs is missing, so each library is
//! checked before use and every call runs under `catch_unwind` as a last
//! guard. All unsafe code of bitparity lives in this module; every block says
//! why it is sound.

pub mod cublaslt;
pub mod device;
pub mod expf;
pub mod guard;
pub mod launch;
pub mod mma;
pub mod moe_combine;
pub mod nvrtc;
pub mod router;
pub mod seqwise_loss;
pub mod shared_expert;
pub mod shared_expert_cublas;
pub mod tma;

pub use device::{device, Device, DeviceInfo};
pub use seqwise_loss::{probe, CudaSeqwise};

/// One CUDA source file of `kernels/`, embedded at build time so that a
/// prebuilt binary carries its kernels.
#[derive(Clone, Copy, Debug)]
pub struct KernelSource {
    pub name: &'static str,
    pub text: &'static str,
}

/// Every kernel source, one per op (candle's kernel-id enum): each compiles
/// and loads on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelId {
    SeqwiseLoss,
    Router,
    SharedExpert,
    /// shared_expert on the tensor cores (subject `cuda-tc`).
    SharedExpertTc,
    /// shared_expert on Hopper's warpgroup MMA (subject `cuda-wgmma`).
    SharedExpertWgmma,
    /// The SwiGLU epilogues between the cuBLAS subject's GEMMs
    /// ([`shared_expert_cublas`]).
    SharedExpertCublas,
    /// The exhaustive check of `bp::exp_cr` (`bitparity-expf-check`).
    ExpfCheck,
    /// The tensor core's MMA step, checked against its model
    /// (`bitparity-mma-check`).
    MmaCheck,
    /// moe_combine's dispatch, its gather combine (profile `serial`) and the
    /// atomic scatter combine that claims none.
    MoeCombine,
}

impl KernelId {
    pub const ALL: [KernelId; 9] = [
        KernelId::SeqwiseLoss,
        KernelId::Router,
        KernelId::SharedExpert,
        KernelId::SharedExpertTc,
        KernelId::SharedExpertWgmma,
        KernelId::SharedExpertCublas,
        KernelId::ExpfCheck,
        KernelId::MmaCheck,
        KernelId::MoeCombine,
    ];

    pub fn source(self) -> KernelSource {
        match self {
            KernelId::SeqwiseLoss => {
                KernelSource { name: "seqwise_loss.cu", text: include_str!("../../../kernels/seqwise_loss.cu") }
            }
            KernelId::Router => KernelSource { name: "router.cu", text: include_str!("../../../kernels/router.cu") },
            KernelId::SharedExpert => {
                KernelSource { name: "shared_expert.cu", text: include_str!("../../../kernels/shared_expert.cu") }
            }
            KernelId::SharedExpertTc => {
                KernelSource { name: "shared_expert_tc.cu", text: include_str!("../../../kernels/shared_expert_tc.cu") }
            }
            KernelId::SharedExpertWgmma => KernelSource {
                name: "shared_expert_wgmma.cu",
                text: include_str!("../../../kernels/shared_expert_wgmma.cu"),
            },
            KernelId::SharedExpertCublas => KernelSource {
                name: "shared_expert_cublas.cu",
                text: include_str!("../../../kernels/shared_expert_cublas.cu"),
            },
            KernelId::ExpfCheck => {
                KernelSource { name: "expf_check.cu", text: include_str!("../../../kernels/expf_check.cu") }
            }
            KernelId::MmaCheck => {
                KernelSource { name: "mma_check.cu", text: include_str!("../../../kernels/mma_check.cu") }
            }
            KernelId::MoeCombine => {
                KernelSource { name: "moe_combine.cu", text: include_str!("../../../kernels/moe_combine.cu") }
            }
        }
    }

    /// The op whose CUDA subject this kernel is, the one `bitparity mutants`
    /// hunts its mutants with: none for the exp and MMA checks (each judged
    /// by its own check) and for the cuBLAS subject's epilogues (a vendor
    /// library's subject, not a kernel under test).
    pub fn op(self) -> Option<&'static str> {
        self.subject().map(|(op, _)| op)
    }

    /// The op and the name of its subject that runs this kernel: `cuda` for
    /// an op's default kernels, `cuda-tc` for the tensor-core ones.
    pub fn subject(self) -> Option<(&'static str, &'static str)> {
        match self {
            KernelId::SeqwiseLoss => Some(("seqwise_loss", "cuda")),
            KernelId::Router => Some(("router", "cuda")),
            KernelId::SharedExpert => Some(("shared_expert", "cuda")),
            KernelId::SharedExpertTc => Some(("shared_expert", "cuda-tc")),
            KernelId::SharedExpertWgmma => Some(("shared_expert", "cuda-wgmma")),
            KernelId::MoeCombine => Some(("moe_combine", "cuda")),
            KernelId::SharedExpertCublas | KernelId::ExpfCheck | KernelId::MmaCheck => None,
        }
    }

    /// The architecture this kernel is compiled for on a device of
    /// `device_arch`: the device's own, except that the kernels with
    /// `wgmma` (the MMA check's and `cuda-wgmma`'s) take sm_90's
    /// arch-specific features (`sm_90a`) on an sm_90 device, the one device
    /// such code runs on.
    pub fn arch(self, device_arch: &str) -> String {
        match self {
            KernelId::MmaCheck | KernelId::SharedExpertWgmma if device_arch == "sm_90" => "sm_90a".into(),
            _ => device_arch.into(),
        }
    }

    /// Whether this kernel's source includes header `name` (`common.cuh`).
    pub fn includes(self, name: &str) -> bool {
        self.source().text.lines().any(|l| l.trim_start().starts_with("#include") && l.contains(&format!("\"{name}\"")))
            || HEADERS.iter().any(|h| {
                h.name != name
                    && self.source().text.contains(&format!("#include \"{}\"", h.name))
                    && h.text.contains(&format!("#include \"{name}\""))
            })
    }
}

/// The shared headers, handed to NVRTC by name (`#include "common.cuh"`).
pub const HEADERS: &[KernelSource] = &[
    KernelSource { name: "common.cuh", text: include_str!("../../../kernels/common.cuh") },
    KernelSource { name: "expf.cuh", text: include_str!("../../../kernels/expf.cuh") },
    KernelSource { name: "expf_hard.cuh", text: include_str!("../../../kernels/expf_hard.cuh") },
    KernelSource { name: "swiglu.cuh", text: include_str!("../../../kernels/swiglu.cuh") },
];

/// Values per lane the kernels are instantiated for (V: 32 V >= E).
pub(crate) const LANE_WIDTHS: [usize; 6] = [1, 2, 4, 8, 16, 32];
/// The largest E any kernel takes: 32 lanes x 32 values in registers.
pub const MAX_EXPERTS: usize = 1024;

/// The poison laid between rows and before the first one: a NaN with a
/// recognisable payload, so a kernel that reads a gap corrupts its output.
pub const GAP_POISON: f32 = f32::from_bits(0x7fc0_dead);

/// The profile a kernel source declares in its header comment
/// (`Numeric profile: "<name>"`), for the check that subject and source agree.
pub fn declared_profile_name(source: &KernelSource) -> Option<&'static str> {
    let text = source.text;
    let start = text.find("Numeric profile: \"")? + "Numeric profile: \"".len();
    let len = text[start..].find('"')?;
    Some(&text[start..start + len])
}
