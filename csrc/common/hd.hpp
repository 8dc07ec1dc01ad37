// Host/device qualifiers so that one header serves the OpenMP and the CUDA backends.
#pragma once

#if defined(__CUDACC__)
#define DP_HD __host__ __device__ __forceinline__
#else
#define DP_HD inline
#endif
