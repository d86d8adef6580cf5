#include "report/names.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace inferscope::report;

namespace {
const std::string E = "\xE2\x80\xA6";  // …
}

TEST_CASE("short_kernel_name keeps the base name and shortened template arguments") {
  // Return type, namespaces (anonymous ones too) and the parameter list go; nested arguments become <…>.
  CHECK(short_kernel_name("void at::native::(anonymous namespace)::vectorized_elementwise_kernel<4, "
                          "at::native::BinaryFunctor<float, float, float, at::native::MulFunctor<float>>, "
                          "at::detail::Array<char*, 3>>(int, at::native::BinaryFunctor<float, float, float, "
                          "at::native::MulFunctor<float>>, at::detail::Array<char*, 3>)") ==
        "vectorized_elementwise_kernel<4, BinaryFunctor<" + E + ">, Array<" + E + ">>");
  // For cutlass the argument is the kernel's identity.
  CHECK(short_kernel_name("void cutlass::Kernel2<cutlass_80_wmma_tensorop_s161616gemm_f16_32x32_128x2_tn_align8>("
                          "cutlass_80_wmma_tensorop_s161616gemm_f16_32x32_128x2_tn_align8::Params)") ==
        "Kernel2<cutlass_80_wmma_tensorop_s161616gemm_f16_32x32_128x2_tn_align8>");
  // Non-template functions, methods and casts of values.
  CHECK(short_kernel_name("at::native::reduce_kernel(int, float*)") == "reduce_kernel");
  CHECK(short_kernel_name("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 4, false, cutlass::half_t>, "
                          "(bool)1, (bool)0>(flash::Flash_fwd_params)") ==
        "flash_fwd_kernel<Flash_fwd_kernel_traits<" + E + ">, (bool)1, (bool)0>");
  // A lambda argument keeps the name of the function it is in.
  CHECK(short_kernel_name("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::"
                          "direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::"
                          "{lambda(float)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::"
                          "TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda(float)#1} const&)::"
                          "{lambda(int)#1}>(int, at::native::gpu_kernel_impl<float>(at::TensorIteratorBase&)::"
                          "{lambda(int)#1})") ==
        "elementwise_kernel<128, 2, gpu_kernel_impl<" + E + ">(" + E + ")::{lambda(int)#1}>");
  // Operators are names, not brackets.
  CHECK(short_kernel_name("void foo::operator()<int>(int) const") == "operator()<int>");
  CHECK(short_kernel_name("bool ns::operator< <float>(float, float)") == "operator< <float>");
}

TEST_CASE("short_kernel_name leaves other names alone, only cut to length") {
  CHECK(short_kernel_name("ampere_fp16_s16816gemm_fp16_128x64_ldg8_f2f_stages_64x4_nn") ==
        "ampere_fp16_s16816gemm_fp16_128x64_ldg8_f2f_stages_64x4_nn");
  CHECK(short_kernel_name("triton_poi_fused_add_0") == "triton_poi_fused_add_0");
  CHECK(short_kernel_name("Memcpy HtoD") == "Memcpy HtoD");
  CHECK(short_kernel_name("") == "");
  const std::string mangled = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_";
  CHECK(short_kernel_name(mangled) == mangled.substr(0, 79) + E);
  // A name cut short by the tracer (brackets that never close) is only truncated.
  CHECK(short_kernel_name("void foo<int, bar<float") == "void foo<int, bar<float");
  CHECK(short_kernel_name("a\nb\t\xff") == "a b \xEF\xBF\xBD");
}

TEST_CASE("short_kernel_name stays within the limit by eliding the last arguments") {
  std::string args;
  for (int k = 0; k < 200; ++k) args += ", ns::Functor" + std::to_string(k) + "<float>";
  const std::string name = "void ns::kernel<128" + args + ">(int)";
  REQUIRE(name.size() > 3000);
  const std::string s = short_kernel_name(name);
  CHECK(s.rfind("kernel<128, Functor0<" + E + ">, Functor1<" + E + ">", 0) == 0);
  CHECK(s.size() >= 70);
  CHECK(s.substr(s.size() - 6) == ", " + E + ">");
  size_t cps = 0;
  for (char c : s) cps += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  CHECK(cps <= kShortNameChars);
  CHECK(short_kernel_name("void ns::a_rather_long_kernel_name<int>(int)", 20) == "a_rather_long_kerne" + E);
  CHECK(short_kernel_name("void ns::kernel<int, float>(int)", 14) == "kernel<int, " + E + ">");
}

TEST_CASE("KernelNames makes short names unique within a report, in report order") {
  const KernelNames names({"void k<ns::A<int>>(int)", "gemm", "void k<ns::A<float>>(int)", "void k<ns::A<int>>(int)",
                           "void k<ns::A<char>>(float)"});
  CHECK(names.short_of("void k<ns::A<int>>(int)") == "k<A<" + E + ">> #1");
  CHECK(names.short_of("void k<ns::A<float>>(int)") == "k<A<" + E + ">> #2");
  CHECK(names.short_of("void k<ns::A<char>>(float)") == "k<A<" + E + ">> #3");
  CHECK(names.short_of("gemm") == "gemm");
  CHECK(names.short_of("void other<x::y>(int)") == "other<y>");  // not in the report: shortened only
  // A kernel literally named like a disambiguated one does not collide.
  const KernelNames odd({"f #1", "void f(int)", "f"});
  CHECK(odd.short_of("f #1") == "f #1");
  CHECK(odd.short_of("void f(int)") == "f #2");
  CHECK(odd.short_of("f") == "f #3");
}

TEST_CASE("KernelNames::split cuts full kernel names out of prose") {
  const KernelNames names({"void k<ns::A<int>>(int)", "void k<ns::A<int>>(int, float)", "gemm"});
  const auto p = names.split("ran void k<ns::A<int>>(int, float) and void k<ns::A<int>>(int) then gemm");
  REQUIRE(p.size() == 5);
  CHECK(p[0].text == "ran ");
  CHECK(p[0].full.empty());
  CHECK(p[1].text == "k<A<" + E + ">> #2");  // the longer name wins where both match
  CHECK(p[1].full == "void k<ns::A<int>>(int, float)");
  CHECK(p[2].text == " and ");
  CHECK(p[3].text == "k<A<" + E + ">> #1");
  CHECK(p[4].text == " then gemm");
  // "gemm" is not cut out: a name that does not shorten stays plain text.
  CHECK(names.split("then gemm").size() == 1);
}
