// AllGathers only selected from (lib/analyze/run/gather_select.hpp) and the kernels that select (ranks.hpp), on two
// ranks' steps written by hand (times in microseconds).
#include "analyze/run/gather_select.hpp"

#include <doctest/doctest.h>

using namespace inferscope::analyze;

namespace {
constexpr int64_t kUs = 1000;
}

TEST_CASE("selection kernels: argmax, argmin and top-k by their names; max reductions, sorts, GEMMs and copies are not") {
  CHECK(is_selection_kernel("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>, "
                            "unsigned int, long, 4> >(...)"));
  CHECK(is_selection_kernel("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMinOps<float>>>"));
  CHECK(is_selection_kernel("void at::native::sbtopk::gatherTopK<float, unsigned int, 2, false>(...)"));
  // a max reduction (amax for fp8 scaling) and a sort follow gathers for other reasons: not selections
  CHECK_FALSE(is_selection_kernel("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MaxOps<float>>>"));
  CHECK_FALSE(is_selection_kernel("void cub::DeviceRadixSortOnesweepKernel<...>"));
  CHECK_FALSE(is_selection_kernel("nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT"));
  CHECK_FALSE(is_selection_kernel("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda>"));
  CHECK_FALSE(is_selection_kernel("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"));
}

TEST_CASE("an AllGather read only by an argmax: its transfer and the copies before the argmax are the saving") {
  // Per step: an AllGather from 100 to 400 us on rank 0 (rank 1 arrives at 150: 250 us of transfer), a copy of the
  // gathered tensor from 400 to 500 us, the argmax at 500 us; then an AllReduce nobody selects from.
  auto make = [](int64_t arrive) {
    RankStep s;
    s.start_ns = 0;
    s.end_ns = 2000 * kUs;
    CollectiveKernel g{"AllGather", false, arrive * kUs, 400 * kUs, 0, 8};
    g.selected_at_ns = 500 * kUs;
    s.collectives = {g, {"AllReduce", false, 900 * kUs, 1000 * kUs, 0, 8}};
    s.compute = {{0, 100 * kUs}, {400 * kUs, 500 * kUs}, {500 * kUs, 520 * kUs}};
    return s;
  };
  const RankStep a = make(100), b = make(150);
  const GatherSelect g = gather_then_select({{&a, &b}, {&a, &b}}, 0);
  CHECK(g.gathers == doctest::Approx(1));
  CHECK(g.transfer_ms == doctest::Approx(0.250));
  CHECK(g.between_ms == doctest::Approx(0.100));  // the copy; the argmax itself is kept
  CHECK(g.saving_ms == doctest::Approx(0.350));

  // No selection after it: nothing counted.
  RankStep c = make(100), d = make(150);
  c.collectives[0].selected_at_ns = d.collectives[0].selected_at_ns = 0;
  CHECK(gather_then_select({{&c, &d}}, 0).saving_ms == 0);
}
