// safetensors: round trip, and every rejection the reference reader makes
// (plus duplicate keys), each with an error naming the file.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "core/io/io.h"

using namespace vit;

namespace {

std::string le64(uint64_t n) {
    std::string s(8, '\0');
    for (int i = 0; i < 8; ++i) s[i] = char((n >> (8 * i)) & 0xff);
    return s;
}
std::string file(const std::string& header, const std::string& data) { return le64(header.size()) + header + data; }

void expect_error(const std::string& bytes, const std::string& needle) {
    try {
        parse_safetensors(bytes, "bad.safetensors");
        FAIL() << "accepted a file that should be rejected (" << needle << ")";
    } catch (const FileError& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("bad.safetensors"), std::string::npos) << m;
        EXPECT_NE(m.find(needle), std::string::npos) << "message: " << m;
    }
}

const std::string kEight(8, '\0');

}  // namespace

TEST(SafeTensors, RoundTripWithMetadata) {
    Tensor2 a = Tensor2::from_shape({2, 3});
    Tensor1 b = Tensor1::from_shape({4});
    for (size_t i = 0; i < 6; ++i) a.flat(i) = float(i) - 2.5f;
    for (size_t i = 0; i < 4; ++i) b.flat(i) = float(i) * 1e-3f;
    auto dir = std::filesystem::temp_directory_path() / "vitscope_st_test";
    std::filesystem::create_directories(dir);
    auto p = (dir / "rt.safetensors").string();
    write_safetensors(p, {array_ref("b", b), array_ref("a", a)}, {{"k", "v"}});
    SafeTensors st = read_safetensors(p);
    ASSERT_EQ(st.tensors.size(), 2u);
    EXPECT_EQ(st.metadata.at("k"), "v");
    EXPECT_EQ(shape_of(st.tensors.at("a")), (Shape{2, 3}));
    for (size_t i = 0; i < 6; ++i) EXPECT_EQ(st.tensors.at("a").flat(i), a.flat(i));
    // No temporary files left behind by the atomic write.
    int n = 0;
    for (auto& e : std::filesystem::directory_iterator(dir)) n += e.path().string().find(".tmp.") != std::string::npos;
    EXPECT_EQ(n, 0);
}

TEST(SafeTensors, ReadsF16AndBF16AndUnalignedData) {
    // F16 1.0 = 0x3c00, -2.0 = 0xc000; BF16 1.5 = 0x3fc0; the data starts at an odd offset
    // after the 1-byte U8 tensor, so it must be copied, not cast.
    std::string h = R"({"u":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                    R"("h":{"dtype":"F16","shape":[2],"data_offsets":[1,5]},)"
                    R"("b":{"dtype":"BF16","shape":[1],"data_offsets":[5,7]}})";
    std::string d = std::string("\x07", 1) + std::string("\x00\x3c\x00\xc0", 4) + std::string("\xc0\x3f", 2);
    SafeTensors st = parse_safetensors(file(h, d), "x");
    EXPECT_EQ(st.tensors.at("h")(0), 1.0f);
    EXPECT_EQ(st.tensors.at("h")(1), -2.0f);
    EXPECT_EQ(st.tensors.at("b")(0), 1.5f);
    EXPECT_EQ(st.dtypes.at("u"), "U8");
}

TEST(SafeTensorsHostile, TooSmall) { expect_error("abc", "too small"); }
TEST(SafeTensorsHostile, EmptyFile) { expect_error("", "too small"); }

TEST(SafeTensorsHostile, AbsurdHeaderSize) { expect_error(le64(200000000) + "{}", "100,000,000"); }

TEST(SafeTensorsHostile, HeaderLengthPastFileEnd) { expect_error(le64(1000) + "{}", "past the end"); }

TEST(SafeTensorsHostile, HugeHeaderLengthDoesNotWrap) { expect_error(le64(UINT64_MAX - 4) + "{}", "100,000,000"); }

TEST(SafeTensorsHostile, InvalidJson) { expect_error(file("{not json", ""), "JSON"); }

TEST(SafeTensorsHostile, InvalidUtf8) { expect_error(file("{\"\xff\xfe\":1}", ""), "JSON"); }

TEST(SafeTensorsHostile, NotAnObject) { expect_error(file("[1,2]", ""), "not a JSON object"); }

TEST(SafeTensorsHostile, DuplicateKeys) {
    std::string h = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
    expect_error(file(h, std::string(4, '\0')), "twice");
}

TEST(SafeTensorsHostile, ShapeSizeMismatch) {
    std::string h = R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})";
    expect_error(file(h, kEight), "needs 12 bytes");
}

TEST(SafeTensorsHostile, ShapeOverflow) {
    std::string h = R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}})";
    expect_error(file(h, kEight), "overflow");
}

TEST(SafeTensorsHostile, OffsetsOutOfRange) {
    std::string h = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
    expect_error(file(h, kEight), "past the end of the data");
}

TEST(SafeTensorsHostile, OverlappingOffsets) {
    std::string h = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
    expect_error(file(h, kEight), "overlaps");
}

TEST(SafeTensorsHostile, GapInData) {
    std::string h = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
    expect_error(file(h, kEight), "gap");
}

TEST(SafeTensorsHostile, TrailingBytesAfterBuffer) {
    std::string h = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
    expect_error(file(h, kEight), "cover 4");
}

TEST(SafeTensorsHostile, ReversedOffsets) {
    std::string h = R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})";
    expect_error(file(h, kEight), "end before they begin");
}

TEST(SafeTensorsHostile, NegativeDimensionAndUnknownDtype) {
    expect_error(file(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", ""), "negative");
    expect_error(file(R"({"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})", "x"), "unknown dtype");
}

TEST(SafeTensorsHostile, MissingFileNamesIt) {
    try {
        read_safetensors("/nonexistent/dir/model.safetensors");
        FAIL();
    } catch (const FileError& e) {
        EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/model.safetensors"), std::string::npos);
    }
}

TEST(Npy, RoundTripAndRejections) {
    Tensor2 t = Tensor2::from_shape({2, 2});
    for (size_t i = 0; i < 4; ++i) t.flat(i) = float(i) + 0.5f;
    std::string b = npy_bytes(t.data(), shape_of(t));
    EXPECT_EQ(b.size() % 64, 16u);  // header padded to 64, then 16 data bytes
    Array u = parse_npy(b, "x.npy");
    EXPECT_EQ(shape_of(u), shape_of(t));
    EXPECT_EQ(u.flat(3), 3.5f);
    EXPECT_THROW(parse_npy("hello", "x.npy"), FileError);
    EXPECT_THROW(parse_npy(b.substr(0, b.size() - 1), "x.npy"), FileError);  // truncated data
    // A well-formed header whose shape product wraps to 0 in 64 bits (2^32 * 2^32), with no data:
    // a naive check accepts it and hands back a tensor claiming 2^64 elements.
    std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }";
    dict += std::string(64 - (10 + dict.size() + 1) % 64, ' ') + "\n";
    std::string huge = std::string("\x93NUMPY\x01\x00", 8) + char(dict.size() & 0xff) + char(dict.size() >> 8) + dict;
    try {
        parse_npy(huge, "huge.npy");
        ADD_FAILURE() << "accepted an overflowing shape";
    } catch (const FileError& e) {
        EXPECT_NE(std::string(e.what()).find("too large"), std::string::npos) << e.what();
    }
    std::string i8 = b;
    i8.replace(i8.find("<f4"), 3, "<i8");
    EXPECT_THROW(parse_npy(i8, "x.npy"), FileError);
    // A key given twice: numpy's reader (a Python dict) takes the last 'shape', so the file is (2,) to
    // numpy; reading the first would run a (1, 2, 2) input numpy never sees. Refused, naming the key.
    std::string twice = b;
    twice.replace(twice.find("'shape'"), 0, "'shape': (2,), ");
    twice.erase(twice.rfind(' ', twice.find('\n')) - 14, 15);  // keep the header's padded length
    ASSERT_EQ(twice.size(), b.size());
    try {
        parse_npy(twice, "twice.npy");
        ADD_FAILURE() << "accepted a header that gives 'shape' twice";
    } catch (const FileError& e) {
        EXPECT_NE(std::string(e.what()).find("twice.npy"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("'shape' twice"), std::string::npos) << e.what();
    }
}
