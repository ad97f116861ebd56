// The instruction-set level the CPU kernels run at (kernels/cpu_isa.h): its names, the cap
// below the CPU's own level, and the dispatchers that follow it.
#include "kernels/cpu_isa.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_f32_matmul.h"

namespace pagoda::kernels {
namespace {

TEST(CpuIsa, NamesRoundTripAndAutoIsTheCpusOwn) {
  EXPECT_EQ(CpuIsaFlagValues(),
            (std::vector<std::string>{"auto", "portable", "avx2", "avx512", "avx512vnni"}));
  for (CpuIsa isa : {CpuIsa::kPortable, CpuIsa::kAvx2, CpuIsa::kAvx512, CpuIsa::kAvx512Vnni}) {
    absl::StatusOr<CpuIsa> parsed = ParseCpuIsa(CpuIsaName(isa));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, isa);
  }
  absl::StatusOr<CpuIsa> automatic = ParseCpuIsa("auto");
  ASSERT_TRUE(automatic.ok());
  EXPECT_EQ(*automatic, DetectedCpuIsa());
  absl::StatusOr<CpuIsa> bad = ParseCpuIsa("avx10");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("\"avx10\""), std::string::npos) << bad.status();
}

TEST(CpuIsa, CapsBelowTheCpuAndRestores) {
  EXPECT_EQ(ActiveCpuIsa(), DetectedCpuIsa());
  {
    ScopedCpuIsaCap cap(CpuIsa::kPortable);
    ASSERT_TRUE(cap.ok());
    EXPECT_EQ(ActiveCpuIsa(), CpuIsa::kPortable);
    EXPECT_FALSE(cpu::HasF32DotKernel());
    EXPECT_STREQ(cpu::F32DotKernelName(), "none");
  }
  EXPECT_EQ(ActiveCpuIsa(), DetectedCpuIsa());
  if (CpuRuns(CpuIsa::kAvx2)) {
    ScopedCpuIsaCap cap(CpuIsa::kAvx2);
    ASSERT_TRUE(cap.ok());
    EXPECT_STREQ(cpu::F32DotKernelName(), "avx2");
  }
  EXPECT_EQ(ActiveCpuIsa(), DetectedCpuIsa());
}

TEST(CpuIsa, ALevelAboveTheCpuIsRefusedAndChangesNothing) {
  if (DetectedCpuIsa() == CpuIsa::kAvx512Vnni) GTEST_SKIP() << "this CPU runs every level";
  const CpuIsa above = static_cast<CpuIsa>(static_cast<int>(DetectedCpuIsa()) + 1);
  absl::Status set = SetCpuIsaCap(above);
  EXPECT_EQ(set.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(set.message()).find(CpuIsaName(above)), std::string::npos) << set;
  EXPECT_EQ(ActiveCpuIsa(), DetectedCpuIsa());
  auto backend = CreateBackend({.device = DeviceKind::kCpu, .cpu_isa = above});
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(CpuIsa, BackendOptionSetsTheLevel) {
  {
    auto backend = CreateBackend({.device = DeviceKind::kCpu, .cpu_isa = CpuIsa::kPortable});
    ASSERT_TRUE(backend.ok()) << backend.status();
    EXPECT_EQ(ActiveCpuIsa(), CpuIsa::kPortable);
  }
  auto backend = CreateBackend({.device = DeviceKind::kCpu, .cpu_isa = DetectedCpuIsa()});
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ(ActiveCpuIsa(), DetectedCpuIsa());
}

}  // namespace
}  // namespace pagoda::kernels
