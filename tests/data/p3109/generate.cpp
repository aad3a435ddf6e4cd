// Test vectors for lowprec.p3109 from awf/p3109-cpp (MIT): see README.md here.
// Build against a checkout of p3109-cpp (commit in README.md) with Boost and MPFR:
//   g++ -std=c++20 -O1 -I<p3109-cpp> generate.cpp -lmpfr -lgmp -o generate
//   ./generate > vectors.txt
// Each line: op format rounding saturation, then the operand and result code points
// as hex strings of two digits per code (x, y, z where the op takes them, r).
#include <cstdio>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "p3109.h"

using namespace p3109;

static std::string hex(const std::vector<std::uint64_t> &v)
{
  std::string s;
  char buf[8];
  for (auto c : v) {
    std::snprintf(buf, sizeof buf, "%02llx", static_cast<unsigned long long>(c));
    s += buf;
  }
  return s;
}

template <typename F, typename R, typename S>
static void run(const char *rname, const char *sname, std::mt19937_64 &rng)
{
  using Spec = ProjectionSpec<R, S>;
  const unsigned n = 1u << F::bitwidth;
  const unsigned count = 256;
  std::vector<std::uint64_t> xs, ys, zs, add, mul, div, fma;
  for (unsigned i = 0; i < count; ++i) {
    xs.push_back(rng() % n);
    ys.push_back(rng() % n);
    zs.push_back(rng() % n);
    F x{xs.back()}, y{ys.back()}, z{zs.back()};
    add.push_back(Add<F>(x, y, Spec{}).codepoint);
    mul.push_back(Multiply<F>(x, y, Spec{}).codepoint);
    div.push_back(Divide<F>(x, y, Spec{}).codepoint);
    fma.push_back(FMA<F>(x, y, z, Spec{}).codepoint);
  }
  std::vector<std::uint64_t> all, sq;
  for (unsigned c = 0; c < n; ++c) {
    all.push_back(c);
    sq.push_back(Sqrt<F>(F{c}, Spec{}).codepoint);
  }
  const std::string f = F::name();
  std::printf("Add %s %s %s %s %s - %s\n", f.c_str(), rname, sname, hex(xs).c_str(), hex(ys).c_str(), hex(add).c_str());
  std::printf("Multiply %s %s %s %s %s - %s\n", f.c_str(), rname, sname, hex(xs).c_str(), hex(ys).c_str(), hex(mul).c_str());
  std::printf("Divide %s %s %s %s %s - %s\n", f.c_str(), rname, sname, hex(xs).c_str(), hex(ys).c_str(), hex(div).c_str());
  std::printf("FMA %s %s %s %s %s %s %s\n", f.c_str(), rname, sname, hex(xs).c_str(), hex(ys).c_str(), hex(zs).c_str(), hex(fma).c_str());
  std::printf("Sqrt %s %s %s %s - - %s\n", f.c_str(), rname, sname, hex(all).c_str(), hex(sq).c_str());
}

template <typename F>
static void formats(std::mt19937_64 &rng)
{
  // p3109-cpp accepts only SatFinite for finite formats.
  run<F, TowardZero, SatFinite>("TowardZero", "SatFinite", rng);
  run<F, NearestTiesToEven, SatFinite>("NearestTiesToEven", "SatFinite", rng);
  if constexpr (F::is_extended) {
    run<F, NearestTiesToEven, OvfInf>("NearestTiesToEven", "OvfInf", rng);
    run<F, ToOdd, SatPropagate>("ToOdd", "SatPropagate", rng);
    run<F, TowardPositive, OvfInf>("TowardPositive", "OvfInf", rng);
  }
}

int main()
{
  std::mt19937_64 rng(3109);
  formats<binary<8, 3, Signedness::Signed, Domain::Extended>>(rng);
  formats<binary<8, 4, Signedness::Signed, Domain::Extended>>(rng);
  formats<binary<8, 1, Signedness::Unsigned, Domain::Finite>>(rng);
  formats<binary<6, 2, Signedness::Signed, Domain::Finite>>(rng);
  return 0;
}
