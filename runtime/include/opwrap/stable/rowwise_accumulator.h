// The accumulators of a row-wise pass, for the stable target's generated CPU loops
// (templates/stable/rowwise.h.j2): `Accumulator<R, T, V>`, reduction R's partial results as four
// vectors of V lanes (one CPU build's vector), and their fold to one value, the lanes halved in
// registers as aten's vec_reduce_all does.
//
// A pass computes its reductions' arguments in a plain loop over W = 4 V elements into a small
// array, which GCC vectorizes (the program's functions are scalar code), and adds the array to
// the accumulators here, as vectors.  The loop itself carried the accumulators before, as an
// array it vectorized: GCC kept that array in memory wherever it did not fully unroll the
// vectorized loop (a pass computing exp: each add a store and a load), and folded the last
// levels below a vector (16 lanes to 1 for float under avx512) as scalar NaN-propagating maxima
// of about 25 instructions each.  Short rows paid both, twice a row: log_softmax over 65536
// rows of 16 float32 ran at 0.41x the full target's.
//
// No include guard, on purpose: a generated row-wise header includes this once inside each CPU
// capability's namespace, after that build's `#pragma GCC target`.  GCC lowers a vector
// extension's operations for the target of the function that holds them, not of the one it is
// inlined into: defined once outside those regions, max's fold became one scalar compare and
// select a lane under avx512 (measured, GCC 12).  The loops' scalar code needs none of this:
// the vectorizer runs on it in the caller, for the caller's target.
//
// Included after <opwrap/stable/rowwise.h> (the reductions, OPWRAP_PW_ALWAYS_INLINE, <cstring>,
// <type_traits>, <utility>).

#if defined(__GNUC__)  // GCC and Clang: vector extensions (vector_size, and `?:` over vectors in C++)
// N values of T as one vector: a capability's 16, 32 or 64 bytes, and their halves.
template <typename T, int N>
struct LaneVector {
  typedef T type __attribute__((vector_size(N * sizeof(T))));
};

// Two vectors of partial results combined lane by lane: R::combine's rule over vectors
// (max and min propagate NaN; x != x only for NaN).
template <typename Vec>
OPWRAP_PW_ALWAYS_INLINE inline Vec combine_lanes(opwrap::stable::rowwise::Sum, Vec a, Vec b) {
  return a + b;
}
template <typename Vec>
OPWRAP_PW_ALWAYS_INLINE inline Vec combine_lanes(opwrap::stable::rowwise::Max, Vec a, Vec b) {
  Vec m = a > b ? a : b;
  m = a != a ? a : m;
  return b != b ? b : m;
}
template <typename Vec>
OPWRAP_PW_ALWAYS_INLINE inline Vec combine_lanes(opwrap::stable::rowwise::Min, Vec a, Vec b) {
  Vec m = a < b ? a : b;
  m = a != a ? a : m;
  return b != b ? b : m;
}

// Lanes `first` to `first + N/2` of v, as a vector of N/2: a register's upper half is one
// extract (a memcpy of the half went through the stack, a store and a narrower load each level).
template <int first, typename Vec, int... I>
OPWRAP_PW_ALWAYS_INLINE inline auto half(Vec v, std::integer_sequence<int, I...>) {
#if defined(__clang__) || __GNUC__ >= 12
  return __builtin_shufflevector(v, v, (first + I)...);
#else
  typename LaneVector<std::remove_reference_t<decltype(v[0])>, sizeof...(I)>::type h;
  std::memcpy(&h, reinterpret_cast<const char*>(&v) + first * sizeof(v[0]), sizeof h);
  return h;
#endif
}

// The N lanes of v to one value: lane j with lane j + N/2, then again on the lower half.
template <typename R, typename T, int N>
OPWRAP_PW_ALWAYS_INLINE inline T fold_lanes(typename LaneVector<T, N>::type v) {
  if constexpr (N == 1) {
    return v[0];
  } else if constexpr (N == 2) {
    return R::combine(v[0], v[1]);
  } else {
    return fold_lanes<R, T, N / 2>(combine_lanes(R{}, half<0>(v, std::make_integer_sequence<int, N / 2>{}),
                                                 half<N / 2>(v, std::make_integer_sequence<int, N / 2>{})));
  }
}

template <typename R, typename T, int V>
struct Accumulator {
  using Vec = typename LaneVector<T, V>::type;
  static constexpr int kWidth = 4 * V;  // the values `add` takes (W)

  // Separate variables, not an array: registers, whatever the loops around them do.
  Vec a0, a1, a2, a3;

  OPWRAP_PW_ALWAYS_INLINE Accumulator() {
    // the identity in every lane (vector + scalar: a broadcast; a loop over the lanes set them
    // one masked broadcast each)
    a0 = a1 = a2 = a3 = Vec{} + R::template identity<T>();
  }
  // W values of the identity at t: a row's last block, shorter than W, is padded with it
  // before its values are computed over the first ones (four vector stores; a loop filling
  // the rest after them became a call of memset, which cost short rows a call, vzeroupper and
  // the spills around it twice a row).
  OPWRAP_PW_ALWAYS_INLINE static void pad(T* t) {
    const Vec identity = Vec{} + R::template identity<T>();
    for (int k = 0; k < 4; ++k) std::memcpy(t + k * V, &identity, sizeof identity);
  }
  // The values of W consecutive elements, in order.
  OPWRAP_PW_ALWAYS_INLINE void add(const T* t) {
    a0 = combine_lanes(R{}, a0, load(t));
    a1 = combine_lanes(R{}, a1, load(t + V));
    a2 = combine_lanes(R{}, a2, load(t + 2 * V));
    a3 = combine_lanes(R{}, a3, load(t + 3 * V));
  }
  // Everything added, as one value: vector k with vector k + 2, then the two, then the lanes
  // (the pairwise order of a fold over the W values).
  OPWRAP_PW_ALWAYS_INLINE T fold() const {
    return fold_lanes<R, T, V>(combine_lanes(R{}, combine_lanes(R{}, a0, a2), combine_lanes(R{}, a1, a3)));
  }

 private:
  OPWRAP_PW_ALWAYS_INLINE static Vec load(const T* t) {
    Vec v;
    std::memcpy(&v, t, sizeof v);
    return v;
  }
};
#else
// Other compilers: the same interface over an array, a loop for each operation.
template <typename R, typename T, int V>
struct Accumulator {
  static constexpr int kWidth = 4 * V;
  T a[kWidth];

  Accumulator() {
    for (T& x : a) x = R::template identity<T>();
  }
  static void pad(T* t) {
    for (int j = 0; j < kWidth; ++j) t[j] = R::template identity<T>();
  }
  void add(const T* t) {
    for (int j = 0; j < kWidth; ++j) a[j] = R::combine(a[j], t[j]);
  }
  T fold() {
    return opwrap::stable::rowwise::fold<R>(a);
  }
};
#endif
