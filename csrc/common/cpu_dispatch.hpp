// Runtime CPU dispatch for the hot CPU loops: a portable build (the default, and every wheel) compiles
// the functions marked DP_CPU_CLONES three times, for x86-64-v4 (AVX-512), x86-64-v3 (AVX2 + FMA)
// and the baseline, and the loader picks the best one the CPU has (GCC's target_clones, an ifunc).
// A build tuned for its own machine (-DDIRECTPET_NATIVE=ON, -march=native) needs no clones.
// directpet.show_config() reports which clone the CPU takes (dp::cpu_dispatch_level()).
#pragma once

#include <string>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && \
    !defined(DIRECTPET_NATIVE_BUILD)
#define DP_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define DP_CPU_DISPATCH 1
#else
#define DP_CPU_CLONES
#define DP_CPU_DISPATCH 0
#endif

namespace dp {

// The clone the loader picks on this CPU ('x86-64-v4', 'x86-64-v3', 'baseline'), or 'native' for a
// -march=native build, or 'none' where this compiler has no clones.
inline std::string cpu_dispatch_level() {
#if DP_CPU_DISPATCH
    __builtin_cpu_init();
    if (__builtin_cpu_supports("x86-64-v4")) return "x86-64-v4";
    if (__builtin_cpu_supports("x86-64-v3")) return "x86-64-v3";
    return "baseline";
#elif defined(DIRECTPET_NATIVE_BUILD)
    return "native";
#else
    return "none";
#endif
}

}  // namespace dp
