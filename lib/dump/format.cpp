#include "dump/format.hpp"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <nmmintrin.h>
#endif

namespace inferscope::dump {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // CRC-32C, reflected

struct Tables {
  std::array<std::array<uint32_t, 256>, 8> t{};
  Tables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (kPoly & (0u - (c & 1u)));
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
  }
};

uint32_t crc32c_sw(const uint8_t* p, size_t n, uint32_t crc) {
  static const Tables tables;
  const auto& t = tables.t;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    v ^= crc;
    crc = t[7][v & 0xff] ^ t[6][(v >> 8) & 0xff] ^ t[5][(v >> 16) & 0xff] ^ t[4][(v >> 24) & 0xff] ^
          t[3][(v >> 32) & 0xff] ^ t[2][(v >> 40) & 0xff] ^ t[1][(v >> 48) & 0xff] ^ t[0][v >> 56];
    p += 8;
    n -= 8;
  }
  while (n--) crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xff];
  return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crc32c_hw(const uint8_t* p, size_t n, uint32_t crc) {
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n--) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}

// Three interleaved streams: the crc32 instruction has a latency of 3 cycles and a throughput of 1, so one
// stream leaves two thirds of it idle. Each 3 x kLane piece is checksummed as three lanes at once (the second
// and third from 0) and joined: the CRC register is linear, so crc(A||B) = shift(crc(A)) ^ crc0(B), where
// shift advances a register over kLane zero bytes (four 256-entry tables, built once from the register's 32
// basis vectors).
constexpr size_t kLane = 4096;

struct LaneShift {
  std::array<std::array<uint32_t, 256>, 4> t{};
  LaneShift() {
    static const uint8_t zeros[kLane] = {};
    uint32_t basis[32];
    for (int b = 0; b < 32; ++b) basis[b] = crc32c_hw(zeros, kLane, 1u << b);
    for (int k = 0; k < 4; ++k)
      for (uint32_t v = 0; v < 256; ++v) {
        uint32_t x = 0;
        for (int j = 0; j < 8; ++j)
          if (v >> j & 1u) x ^= basis[8 * k + j];
        t[k][v] = x;
      }
  }
  uint32_t operator()(uint32_t r) const { return t[0][r & 0xff] ^ t[1][(r >> 8) & 0xff] ^ t[2][(r >> 16) & 0xff] ^ t[3][r >> 24]; }
};

__attribute__((target("sse4.2"))) uint32_t crc32c_hw3(const uint8_t* p, size_t n, uint32_t crc) {
  if (n < 3 * kLane) return crc32c_hw(p, n, crc);
  static const LaneShift shift;
  while (n >= 3 * kLane) {
    uint64_t c0 = crc, c1 = 0, c2 = 0;
    for (size_t i = 0; i < kLane; i += 8) {
      uint64_t v0, v1, v2;
      std::memcpy(&v0, p + i, 8);
      std::memcpy(&v1, p + kLane + i, 8);
      std::memcpy(&v2, p + 2 * kLane + i, 8);
      c0 = _mm_crc32_u64(c0, v0);
      c1 = _mm_crc32_u64(c1, v1);
      c2 = _mm_crc32_u64(c2, v2);
    }
    crc = shift(shift(uint32_t(c0)) ^ uint32_t(c1)) ^ uint32_t(c2);
    p += 3 * kLane;
    n -= 3 * kLane;
  }
  return crc32c_hw(p, n, crc);
}

bool have_sse42() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  return (c & bit_SSE4_2) != 0;
}
#endif

}  // namespace

uint32_t crc32c(const void* data, size_t size, uint32_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
#if defined(__x86_64__)
  static const bool hw = have_sse42();
  crc = hw ? crc32c_hw3(p, size, crc) : crc32c_sw(p, size, crc);
#else
  crc = crc32c_sw(p, size, crc);
#endif
  return ~crc;
}

ChunkHeader make_chunk_header(ChunkType type, uint32_t count, const void* payload, size_t length) {
  return make_chunk_header_with_crc(type, count, length, crc32c(payload, length));
}

ChunkHeader make_chunk_header_with_crc(ChunkType type, uint32_t count, uint64_t length, uint32_t payload_crc) {
  ChunkHeader h{};
  h.type = static_cast<uint32_t>(type);
  h.count = count;
  h.length = length;
  h.payload_crc = payload_crc;
  h.header_crc = crc32c(&h, offsetof(ChunkHeader, header_crc));
  return h;
}

FileHeader make_file_header(uint32_t flags) {
  FileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version_major = kVersionMajor;
  h.version_minor = kVersionMinor;
  h.flags = flags;
  return h;
}

void ChunkBuilder::add_string(uint32_t id, std::string_view s) {
  StringEntryHeader h{id, static_cast<uint32_t>(s.size())};
  append(&h, sizeof(h));
  append(s.data(), s.size());
  ++count_;
}

void ChunkBuilder::add_key_value(std::string_view key, std::string_view value) {
  uint16_t kl = static_cast<uint16_t>(key.size() > 0xffff ? 0xffff : key.size());
  uint32_t vl = static_cast<uint32_t>(value.size());
  append(&kl, sizeof(kl));
  append(&vl, sizeof(vl));
  append(key.data(), kl);
  append(value.data(), vl);
  ++count_;
}

void ChunkBuilder::finish_into(std::vector<uint8_t>& out) const {
  ChunkHeader h = make_chunk_header(type_, count_, payload_.data(), payload_.size());
  const auto* hb = reinterpret_cast<const uint8_t*>(&h);
  out.insert(out.end(), hb, hb + sizeof(h));
  out.insert(out.end(), payload_.begin(), payload_.end());
}

std::vector<uint8_t> ChunkBuilder::finish() const {
  std::vector<uint8_t> out;
  out.reserve(sizeof(ChunkHeader) + payload_.size());
  finish_into(out);
  return out;
}

std::vector<std::pair<std::string, std::string>> parse_key_values(const uint8_t* p, size_t n, uint32_t count,
                                                                  uint64_t file_offset) {
  std::vector<std::pair<std::string, std::string>> kv;
  size_t off = 0;
  for (uint32_t i = 0; i < count; ++i) {
    uint16_t kl;
    uint32_t vl;
    if (off + 6 > n) throw DumpError("key/value entry " + std::to_string(i) + " runs past its chunk", file_offset + off);
    std::memcpy(&kl, p + off, 2);
    std::memcpy(&vl, p + off + 2, 4);
    if (off + 6 + kl + uint64_t(vl) > n)
      throw DumpError("key/value entry " + std::to_string(i) + " runs past its chunk", file_offset + off);
    kv.emplace_back(std::string(reinterpret_cast<const char*>(p + off + 6), kl),
                    std::string(reinterpret_cast<const char*>(p + off + 6 + kl), vl));
    off += 6 + kl + vl;
  }
  return kv;
}

}  // namespace inferscope::dump
