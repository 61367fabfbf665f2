// Highway dispatch for kernels/cpu, the one place that knows whether targets are chosen at run time.
//
// Each kernel file starts with
//   #undef HWY_TARGET_INCLUDE
//   #define HWY_TARGET_INCLUDE "kernels/cpu/<file>.cc"
//   #include "kernels/cpu/hwy_dispatch.h"
// and ends with an `#if HWY_ONCE` block that uses EMBER_HWY_EXPORT(fn) / EMBER_HWY_DISPATCH(fn).
//
// EMBER_HWY_DISPATCH=dynamic (default): foreach_target.h re-includes the file once per compiled
// target and calls go through Highway's dispatch table (libhwy picks the best supported target).
// EMBER_HWY_DISPATCH=static (CMake defines EMBER_HWY_STATIC_DISPATCH=1 and HWY_COMPILE_ONLY_STATIC):
// only the target implied by the compiler flags is compiled and called directly; no foreach_target,
// no dispatch table, no libhwy symbol needed. Note (docs/DESIGN.md §9): with GCC 12 the static
// target is SCALAR unless flags such as -march=native or -march=x86-64-v3 -maes -mpclmul are given.
//
// No include guard on purpose for the foreach_target part; the macros are guarded.
#if !defined(EMBER_HWY_STATIC_DISPATCH) || !EMBER_HWY_STATIC_DISPATCH
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#endif
#include "hwy/highway.h"

#ifndef EMBER_KERNELS_CPU_HWY_DISPATCH_H_
#define EMBER_KERNELS_CPU_HWY_DISPATCH_H_
#if defined(EMBER_HWY_STATIC_DISPATCH) && EMBER_HWY_STATIC_DISPATCH
#define EMBER_HWY_EXPORT(fn) static_assert(true, "")
#define EMBER_HWY_DISPATCH(fn) HWY_STATIC_DISPATCH(fn)
#else
#define EMBER_HWY_EXPORT(fn) HWY_EXPORT(fn)
#define EMBER_HWY_DISPATCH(fn) HWY_DYNAMIC_DISPATCH(fn)
#endif
#endif  // EMBER_KERNELS_CPU_HWY_DISPATCH_H_
