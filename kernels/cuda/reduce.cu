// The reduce entry points: fc_reduce_<dtype>_<op> and
// fc_reduce_strided_<dtype>_<op>, extern "C" (unmangled), one per
// (dtype, op) pair that ReduceOp::check_device_dtype accepts, with the names of
// DataType::name and ReduceOp::name (kernels/src/names.rs builds the same names).

// DIV: the avg divisor the body gets (sum kernels pass 0, so that sum and
// avg share one body). K: the policy (ops.cuh, loc.cuh).
#define FC_REDUCE(dt, op, DIV, ...)                                                                                    \
    extern "C" __global__ void fc_reduce_##dt##_##op(ReduceArgs a) {                                                   \
        fc_reduce<__VA_ARGS__>(a.dst, FC_PLAIN_SOURCES(a), a.count, a.nsrcs, DIV);                                     \
    }                                                                                                                  \
    extern "C" __global__ void fc_reduce_strided_##dt##_##op(ReduceArgs a) {                                           \
        fc_reduce<__VA_ARGS__>(a.dst, FC_STRIDED_SOURCES(a), a.count, a.nsrcs, DIV);                                   \
    }

// Integers: all 13 operations. P: bytes of a (value, index) pair.
#define FC_INTEGER(dt, T, P)                                                                                           \
    FC_REDUCE(dt, sum, 0, KInt<T, OpAdd, true>)                                                                        \
    FC_REDUCE(dt, prod, 0, KInt<T, OpMul, false>)                                                                      \
    FC_REDUCE(dt, max, 0, KInt<T, OpMax, false>)                                                                       \
    FC_REDUCE(dt, min, 0, KInt<T, OpMin, false>)                                                                       \
    FC_REDUCE(dt, land, 0, KLogical<T, OpAnd>)                                                                         \
    FC_REDUCE(dt, lor, 0, KLogical<T, OpOr>)                                                                           \
    FC_REDUCE(dt, lxor, 0, KLogical<T, OpXor>)                                                                         \
    FC_REDUCE(dt, band, 0, KInt<T, OpAnd, false>)                                                                      \
    FC_REDUCE(dt, bor, 0, KInt<T, OpOr, false>)                                                                        \
    FC_REDUCE(dt, bxor, 0, KInt<T, OpXor, false>)                                                                      \
    FC_REDUCE(dt, maxloc, 0, KLoc<LocSelf<T>, P, true>)                                                                \
    FC_REDUCE(dt, minloc, 0, KLoc<LocSelf<T>, P, false>)                                                               \
    FC_REDUCE(dt, avg, a.avg_divisor, KInt<T, OpAdd, true>)

FC_INTEGER(int8, i8, 8)
FC_INTEGER(int16, i16, 8)
FC_INTEGER(int32, i32, 8)
FC_INTEGER(int64, i64, 16)
FC_INTEGER(int128, i128, 32)
FC_INTEGER(uint8, u8, 8)
FC_INTEGER(uint16, u16, 8)
FC_INTEGER(uint32, u32, 8)
FC_INTEGER(uint64, u64, 16)
FC_INTEGER(uint128, u128, 32)

// f32 and f64: sum, prod, max, min, maxloc, minloc, avg.
#define FC_FLOAT(dt, F, P)                                                                                             \
    FC_REDUCE(dt, sum, 0, KFloat<F, OpAdd, true>)                                                                      \
    FC_REDUCE(dt, prod, 0, KFloat<F, OpMul, false>)                                                                    \
    FC_REDUCE(dt, max, 0, KFloat<F, OpMax, false>)                                                                     \
    FC_REDUCE(dt, min, 0, KFloat<F, OpMin, false>)                                                                     \
    FC_REDUCE(dt, maxloc, 0, KLoc<LocSelf<F>, P, true>)                                                                \
    FC_REDUCE(dt, minloc, 0, KLoc<LocSelf<F>, P, false>)                                                               \
    FC_REDUCE(dt, avg, a.avg_divisor, KFloat<F, OpAdd, true>)

FC_FLOAT(float32, float, 8)
FC_FLOAT(float64, double, 16)

// f16, bf16, float8: the same operations, accumulated in f32.
#define FC_NARROW(dt, N)                                                                                               \
    FC_REDUCE(dt, sum, 0, KNarrow<N, OpAdd, true>)                                                                     \
    FC_REDUCE(dt, prod, 0, KNarrow<N, OpMul, false>)                                                                   \
    FC_REDUCE(dt, max, 0, KNarrow<N, OpMax, false>)                                                                    \
    FC_REDUCE(dt, min, 0, KNarrow<N, OpMin, false>)                                                                    \
    FC_REDUCE(dt, maxloc, 0, KLoc<LocNarrow<N>, 8, true>)                                                              \
    FC_REDUCE(dt, minloc, 0, KLoc<LocNarrow<N>, 8, false>)                                                             \
    FC_REDUCE(dt, avg, a.avg_divisor, KNarrow<N, OpAdd, true>)

FC_NARROW(float16, F16)
FC_NARROW(bfloat16, BF16)
FC_NARROW(float8_e4m3, E4M3)
FC_NARROW(float8_e5m2, E5M2)

// Complex: sum, prod, avg (complex numbers are not ordered).
#define FC_COMPLEX(dt, F)                                                                                              \
    FC_REDUCE(dt, sum, 0, KComplexSum<F, true>)                                                                        \
    FC_REDUCE(dt, prod, 0, KComplexProd<F>)                                                                            \
    FC_REDUCE(dt, avg, a.avg_divisor, KComplexSum<F, true>)

FC_COMPLEX(float32_complex, float)
FC_COMPLEX(float64_complex, double)

// float128 and float128 complex: no kernels (no 128-bit float arithmetic on
// the device; ReduceOp::check_device_dtype refuses them).
