//! The CUDA subject (kernels/seqwise_loss.cu through cudarc and NVRTC).
