// The reduce entry points: fc_reduce_<dtype>_<op> and
// fc_reduce_strided_<dtype>_<op>, extern "C" (unmangled), one per
// (dtype, op) pair that ReduceOp::check_dtype accepts, with the names of
// DataType::name and ReduceOp::name (kernels/src/names.rs builds the same names).

#define FC_REDUCE(dt, op, ...)                                                                                     \
    extern "C" __global__ void fc_reduce_##dt##_##op(ReduceArgs a) { fc_reduce<__VA_ARGS__, false>(a); }         \
    extern "C" __global__ void fc_reduce_strided_##dt##_##op(ReduceArgs a) { fc_reduce<__VA_ARGS__, true>(a); }

// Integers: all 13 operations. P: bytes of a (value, index) pair.
#define FC_INTEGER(dt, T, P)                                                                                       \
    FC_REDUCE(dt, sum, KInt<T, OpAdd, false>)                                                                      \
    FC_REDUCE(dt, prod, KInt<T, OpMul, false>)                                                                     \
    FC_REDUCE(dt, max, KInt<T, OpMax, false>)                                                                      \
    FC_REDUCE(dt, min, KInt<T, OpMin, false>)                                                                      \
    FC_REDUCE(dt, land, KLogical<T, OpAnd>)                                                                        \
    FC_REDUCE(dt, lor, KLogical<T, OpOr>)                                                                          \
    FC_REDUCE(dt, lxor, KLogical<T, OpXor>)                                                                        \
    FC_REDUCE(dt, band, KInt<T, OpAnd, false>)                                                                     \
    FC_REDUCE(dt, bor, KInt<T, OpOr, false>)                                                                       \
    FC_REDUCE(dt, bxor, KInt<T, OpXor, false>)                                                                     \
    FC_REDUCE(dt, maxloc, KLoc<LocSelf<T>, P, true>)                                                               \
    FC_REDUCE(dt, minloc, KLoc<LocSelf<T>, P, false>)                                                              \
    FC_REDUCE(dt, avg, KInt<T, OpAdd, true>)

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
#define FC_FLOAT(dt, F, P)                                                                                         \
    FC_REDUCE(dt, sum, KFloat<F, OpAdd, false>)                                                                    \
    FC_REDUCE(dt, prod, KFloat<F, OpMul, false>)                                                                   \
    FC_REDUCE(dt, max, KFloat<F, OpMax, false>)                                                                    \
    FC_REDUCE(dt, min, KFloat<F, OpMin, false>)                                                                    \
    FC_REDUCE(dt, maxloc, KLoc<LocSelf<F>, P, true>)                                                               \
    FC_REDUCE(dt, minloc, KLoc<LocSelf<F>, P, false>)                                                              \
    FC_REDUCE(dt, avg, KFloat<F, OpAdd, true>)

FC_FLOAT(float32, float, 8)
FC_FLOAT(float64, double, 16)

// f16, bf16, float8: the same operations, accumulated in f32.
#define FC_NARROW(dt, N)                                                                                           \
    FC_REDUCE(dt, sum, KNarrow<N, OpAdd, false>)                                                                   \
    FC_REDUCE(dt, prod, KNarrow<N, OpMul, false>)                                                                  \
    FC_REDUCE(dt, max, KNarrow<N, OpMax, false>)                                                                   \
    FC_REDUCE(dt, min, KNarrow<N, OpMin, false>)                                                                   \
    FC_REDUCE(dt, maxloc, KLoc<LocNarrow<N>, 8, true>)                                                             \
    FC_REDUCE(dt, minloc, KLoc<LocNarrow<N>, 8, false>)                                                            \
    FC_REDUCE(dt, avg, KNarrow<N, OpAdd, true>)

FC_NARROW(float16, F16)
FC_NARROW(bfloat16, BF16)
FC_NARROW(float8_e4m3, E4M3)
FC_NARROW(float8_e5m2, E5M2)

// Complex: sum, prod, avg (complex numbers are not ordered).
#define FC_COMPLEX(dt, F)                                                                                          \
    FC_REDUCE(dt, sum, KComplexSum<F, false>)                                                                      \
    FC_REDUCE(dt, prod, KComplexProd<F>)                                                                           \
    FC_REDUCE(dt, avg, KComplexSum<F, true>)

FC_COMPLEX(float32_complex, float)
FC_COMPLEX(float64_complex, double)

// float128 and float128 complex: no kernels (no 128-bit float arithmetic on
// the host either; ReduceOp::check_dtype refuses them).
