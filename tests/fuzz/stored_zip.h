// A zip of stored entries with correct CRCs (zlib's crc32), as Python's zipfile
// writes one with ZIP_STORED: for the pickle harness and the unit tests, which
// put a pickle of their own behind a valid archive.
#pragma once
#include <zlib.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace fuzz {

inline std::string stored_zip(const std::vector<std::pair<std::string, std::string>>& entries) {
    auto u16 = [](std::string& o, uint32_t v) { o.push_back(char(v & 0xff)); o.push_back(char(v >> 8 & 0xff)); };
    auto u32 = [&](std::string& o, uint32_t v) { u16(o, v & 0xffff); u16(o, v >> 16); };
    std::string out, dir;
    for (auto& [name, data] : entries) {
        const uint32_t crc = uint32_t(crc32(0, reinterpret_cast<const Bytef*>(data.data()), uInt(data.size())));
        const uint32_t at = uint32_t(out.size());
        u32(out, 0x04034b50); u16(out, 20); u16(out, 0); u16(out, 0); u16(out, 0); u16(out, 0x21);
        u32(out, crc); u32(out, uint32_t(data.size())); u32(out, uint32_t(data.size()));
        u16(out, uint32_t(name.size())); u16(out, 0);
        out += name;
        out += data;
        u32(dir, 0x02014b50); u16(dir, 20); u16(dir, 20); u16(dir, 0); u16(dir, 0); u16(dir, 0); u16(dir, 0x21);
        u32(dir, crc); u32(dir, uint32_t(data.size())); u32(dir, uint32_t(data.size()));
        u16(dir, uint32_t(name.size())); u16(dir, 0); u16(dir, 0); u16(dir, 0); u16(dir, 0); u32(dir, 0); u32(dir, at);
        dir += name;
    }
    const uint32_t dir_at = uint32_t(out.size());
    out += dir;
    u32(out, 0x06054b50); u16(out, 0); u16(out, 0); u16(out, uint32_t(entries.size())); u16(out, uint32_t(entries.size()));
    u32(out, uint32_t(dir.size())); u32(out, dir_at); u16(out, 0);
    return out;
}

}  // namespace fuzz
