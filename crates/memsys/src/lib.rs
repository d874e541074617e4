//! The timing model of the GPU memory hierarchy.
