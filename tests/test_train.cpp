// Training: the IDX reader on Debian's real Fashion-MNIST and on broken files,
// finite-difference gradient checks, and a short run that must learn.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/io/checkpoint.h"
#include "core/io/io.h"
#include "core/model/pos_embed.h"
#include "core/train/train.h"
#include "core/train/trainer.h"

#include <random>

using namespace vit;

namespace {
std::string tmp(const std::string& n) {
    auto d = std::filesystem::temp_directory_path() / "vitscope_train_test";
    std::filesystem::create_directories(d);
    return (d / n).string();
}
std::string be32(uint32_t v) { return {char(v >> 24), char(v >> 16), char(v >> 8), char(v)}; }
void write(const std::string& p, const std::string& b) { std::ofstream(p, std::ios::binary) << b; }
bool have_fmnist() { return std::filesystem::exists(default_fashion_mnist_dir() + "/t10k-labels-idx1-ubyte.gz"); }
}  // namespace

TEST(Idx, ReadsDebiansFashionMnist) {
    if (!have_fmnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
    Dataset test = load_fashion_mnist(default_fashion_mnist_dir(), false);
    EXPECT_EQ(test.n, 10000);
    EXPECT_EQ(test.rows, 28);
    EXPECT_EQ(test.cols, 28);
    EXPECT_EQ(test.labels[0], 9);  // the first test image is an ankle boot
    EXPECT_EQ(test.labels[1], 2);  // then a pullover
    std::vector<int> count(10);
    for (auto l : test.labels) count.at(l)++;
    for (int c : count) EXPECT_EQ(c, 1000);  // balanced: 1,000 per class
}

TEST(Idx, GzippedAndPlainAgree) {
    std::string im = be32(0x803) + be32(2) + be32(2) + be32(2) + std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8);
    std::string lb = be32(0x801) + be32(2) + std::string("\x03\x07", 2);
    write(tmp("i.idx"), im);
    write(tmp("l.idx"), lb);
    gzFile g = gzopen(tmp("i.idx.gz").c_str(), "wb");
    gzwrite(g, im.data(), unsigned(im.size()));
    gzclose(g);
    Dataset a = load_idx(tmp("i.idx"), tmp("l.idx")), b = load_idx(tmp("i.idx.gz"), tmp("l.idx"));
    EXPECT_EQ(a.images, b.images);
    EXPECT_EQ(a.labels[1], 7);
    EXPECT_EQ(a.images[7], 8);
}

TEST(IdxBad, WrongMagicTruncatedAndMismatchedCounts) {
    std::string lb = be32(0x801) + be32(2) + std::string("\x03\x07", 2);
    write(tmp("l2.idx"), lb);
    auto expect_msg = [&](const std::string& img, const std::string& needle) {
        write(tmp("bad.idx"), img);
        try {
            load_idx(tmp("bad.idx"), tmp("l2.idx"));
            ADD_FAILURE() << "accepted: " << needle;
        } catch (const FileError& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find("bad.idx"), std::string::npos) << e.what();
        }
    };
    expect_msg(be32(0x802) + be32(2) + be32(2) + be32(2) + std::string(8, '\0'), "magic");
    expect_msg(be32(0x803) + be32(2) + be32(2) + be32(2) + std::string(5, '\0'), "truncated");
    expect_msg(be32(0x803) + be32(3) + be32(2) + be32(2) + std::string(12, '\0'), "3 images but");
    expect_msg("", "not an IDX image file");
    EXPECT_THROW(load_fashion_mnist("/nonexistent", true), FileError);
}

// Central differences of the loss against Batch::backward for a few entries of every parameter.
namespace {
// Every parameter moved off timm's init (zero biases, unit LayerNorms), so that each matters.
void perturb(Weights& w, std::mt19937& rng, std::normal_distribution<float>& nd) {
    for_each_param([&](const std::string&, auto& t) { for (auto& v : t) v += nd(rng); }, w);
}
}  // namespace

namespace {
// Batch::backward's parameter gradients (the training path: the forward keeps only the table's `kept` stages)
// against central differences of the loss, at three entries of every parameter the forward reads; `skip` names
// those it does not differentiate (returns how many entries were checked).
int check_param_grads(const Config& c, const Options& opt, unsigned seed, const std::vector<std::string>& skip = {}) {
    Weights w = init_weights(c, seed);
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.f, 0.3f);
    perturb(w, rng, nd);
    const size_t B = 3;
    const RunDims rd = run_dims(c, opt);
    Tensor4 x = Tensor4::from_shape({B, size_t(c.channels), size_t(rd.img_h), size_t(rd.img_w)});
    for (auto& v : x) v = nd(rng) * 3;
    std::vector<int> y = {1, 4, 2};
    Batch b;
    Tensor2 dl;
    Batch::cross_entropy(b.forward(w, x, opt), y.data(), dl);
    Weights g = zeros_like(w);
    b.backward(w, dl, g);
    auto loss = [&]() {
        Batch bb;
        Tensor2 unused;
        return double(Batch::cross_entropy(bb.forward(w, x, opt), y.data(), unused));
    };
    int checked = 0;
    for_each_param(
        [&](const std::string& name, auto& t, const auto& gt) {
            if (!opt.affine && name.find("norm") != std::string::npos) return;  // unused
            for (const std::string& sk : skip)
                if (name.find(sk) != std::string::npos) return;
            for (size_t i : {size_t(0), t.size() / 2, t.size() - 1}) {
                const float h = 1e-2f, orig = t.flat(i);
                t.flat(i) = orig + h;
                double lp = loss();
                t.flat(i) = orig - h;
                double lm = loss();
                t.flat(i) = orig;
                double fd = (lp - lm) / (2 * h), an = gt.flat(i);
                EXPECT_NEAR(an, fd, 2e-3 + 2e-2 * std::fabs(fd)) << name << "[" << i << "]";
                ++checked;
            }
        },
        w, g);
    return checked;
}

// A small model of a family's preset with a classifier of 5 classes on top (the families' own end in an embedding).
Config small_classifier(const std::string& name) {
    Config c = preset(name);
    c.depth = 2;
    c.width = 32;
    c.heads = 2;
    c.mlp = 48;
    c.image_size = 3 * c.patch;
    c.pos_grid = 0;
    c.pre.resize = 0;
    c.head = Head::Classifier;
    c.classes = 5;
    c.embed_dim = 0;
    c.name = name + "-small";
    c.validate();
    return c;
}
}  // namespace

TEST(GradCheck, EveryParameterAgainstFiniteDifferences) {
    Options other;
    other.affine = false;
    other.unbiased = true;
    other.pooling = Pooling::Mean;
    for (Options opt : {Options{}, other}) {
        SCOPED_TRACE(opt.affine ? "defaults" : "no-affine, unbiased, mean pooling");
        EXPECT_GT(check_param_grads(preset("toy-rgb8"), opt, 7), 40);
    }
}

// The 2025 families' parts on the training path: RoPE with storage tokens, layer scale and no position table
// (DINOv3: its periods are a fixed buffer, not differentiated), RMSNorm at every site and on the patch embeddings,
// blocks without biases (AIMv2: the biases it holds as zeros are never read, so not checked), EVA-02 Base's RoPE beside
// the table and its LayerNorm inside the MLP (the K third of its q/k/v bias is read as any other: checked too).
TEST(GradCheck, RopeAndRmsNormParametersAgainstFiniteDifferences) {
    {
        SCOPED_TRACE("dinov3");
        EXPECT_GT(check_param_grads(small_classifier("dinov3-s16"), {}, 5, {"rope_embed.periods"}), 60);
    }
    {
        SCOPED_TRACE("aimv2");
        EXPECT_GT(check_param_grads(small_classifier("aimv2-l14"), {}, 5, {".bias"}), 40);
    }
    {
        SCOPED_TRACE("eva02 base (mlp norm)");
        EXPECT_GT(check_param_grads(small_classifier("eva02-b14"), {}, 5), 80);
    }
}

TEST(GradCheck, InputGradientOfALogitAgainstFiniteDifferences) {
    Config c = preset("toy-gray4");
    Weights w = init_weights(c, 9);
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.f, 0.3f);
    perturb(w, rng, nd);
    Tensor3 x = Tensor3::from_shape({1, 4, 4});
    for (auto& v : x) v = nd(rng) * 3;
    RunRequest req;
    req.grads = true;
    req.grad_class = 3;
    Trace gt = run(w, x, {}, req);
    ASSERT_EQ(gt.grad_class(), 3);
    const Array& gx = *gt.grad(StageId{StageKind::Input});
    ASSERT_EQ(shape_of(gx), shape_of(x));
    auto logit3 = [&]() {
        Batch b;
        Tensor4 x4 = Tensor4::from_shape({1, 1, 4, 4});
        std::copy(x.begin(), x.end(), x4.begin());
        return double(b.forward(w, x4, {}).flat(3));
    };
    for (size_t i = 0; i < 16; ++i) {
        const float h = 1e-2f, orig = x.flat(i);
        x.flat(i) = orig + h;
        double hi = logit3();
        x.flat(i) = orig - h;
        double lo = logit3();
        x.flat(i) = orig;
        EXPECT_NEAR(gx.flat(i), (hi - lo) / (2 * h), 2e-3 + 2e-2 * std::fabs(gx.flat(i))) << i;
    }
    ASSERT_TRUE(gt.grad(*parse_stage_name("blocks.0.attn.pattern")));
    EXPECT_EQ(shape_of(*gt.grad(*parse_stage_name("blocks.0.attn.pattern"))), (Shape{2, 5, 5}));
}

TEST(Training, ShortRunOnFashionMnistSubsetLearns) {
    if (!have_fmnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
    Dataset train = load_fashion_mnist(default_fashion_mnist_dir(), true);
    Dataset test = load_fashion_mnist(default_fashion_mnist_dir(), false);
    Config c = preset("fmnist");
    c.depth = 2; c.width = 32; c.heads = 2; c.mlp = 64; c.patch = 7;
    TrainSettings s;
    s.epochs = 3; s.batch = 64; s.limit = 3200; s.lr = 2e-3f; s.warmup_epochs = 0.5f; s.augment = false;
    Trainer tr(init_weights(c, 1), s, train);
    double first = -1, last = 0;
    while (!tr.done())
        tr.run_epoch([&](const StepInfo& i) {
            if (first < 0 && i.step_in_epoch == 5) first = i.epoch_loss;
            last = i.epoch_loss;
            return true;
        });
    EvalResult r = evaluate(tr.weights(), test, 1000);
    std::printf("loss %.3f -> %.3f, test accuracy %.1f%% after %d steps\n", first, last, 100 * r.accuracy,
                3 * 3200 / 64);
    EXPECT_LT(last, 0.6 * first);
    EXPECT_GT(r.accuracy, 0.5);  // chance is 0.1; typically ~0.6 here
}

TEST(Training, CheckpointAndOptimizerStateRoundTrip) {
    Config c = preset("toy-gray4");
    Weights w = init_weights(c, 2);
    AdamW a;
    a.init(w);
    a.step = 17;
    a.m.cls(0) = 0.5f;
    save_training_checkpoint(tmp("ck.safetensors"), w, a, 3, {{"command", "x"}});
    AdamW b;
    EXPECT_EQ(load_optimizer_state(tmp("ck.safetensors"), w, b), 3);
    EXPECT_EQ(b.step, 17);
    EXPECT_EQ(b.m.cls(0), 0.5f);
    EXPECT_EQ(load_optimizer_state(tmp("nothing.safetensors"), w, b), -1);
}

// `train --init-from`: the 32-pixel crops' model (4 x 4 patches) starts the 64-pixel scenes model (8 x 8): every tensor
// is the file's but the position table's grid rows, which keep the new model's own initialisation; any other shape
// that differs is refused, naming the tensor.
namespace {
// A crops model (the scenes preset at 32 pixels: 4 x 4 patches) written to `name`, every value unlike any fresh
// model's (biases 0, norms' weights 1): a tensor left out shows.
std::string crops_model_file(const std::string& name) {
    Config small = preset("scenes");
    small.image_size = 32;
    const std::string file = tmp(name);
    Weights src = init_weights(small, 3);
    for_each_param(
        [](const std::string&, auto& t) {
            for (size_t i = 0; i < t.size(); ++i) t.data()[i] += 0.5f + 0.001f * float(i % 97);
        },
        src);
    save_model(file, src, {{"command", "test"}});
    return file;
}
}  // namespace

TEST(Training, InitFromCopiesEveryTensorButTheGridRowsAndRefusesOtherShapes) {
    const std::string file = crops_model_file("crops.safetensors");
    const SafeTensors st = read_safetensors(file);
    const Config big = preset("scenes");
    const Weights fresh = init_weights(big, 4);
    Weights w = fresh;
    const InitFrom r = init_from(w, load_model(file).weights);
    size_t n = 0;
    for_each_param(
        [&](const std::string& name, const auto& t, const auto& t0) {
            SCOPED_TRACE(name);
            ++n;
            const Array& f = st.tensors.at(name);
            if (name != "pos_embed") {
                ASSERT_EQ(t.size(), f.size());
                for (size_t i = 0; i < t.size(); ++i) ASSERT_EQ(t.data()[i], f.data()[i]) << "element " << i;
                return;
            }
            ASSERT_EQ(t.shape(0), size_t(65));
            ASSERT_EQ(f.size(), size_t(17) * t.shape(1)) << "the file's table: cls and 4 x 4";
            for (size_t j = 0; j < t.shape(1); ++j) ASSERT_EQ(t(0, j), f.data()[j]) << "the cls row";
            for (size_t i = 1; i < 65; ++i)
                for (size_t j = 0; j < t.shape(1); ++j) ASSERT_EQ(t(i, j), t0(i, j)) << "grid row " << i;
        },
        w, fresh);
    EXPECT_EQ(r.copied.size(), n);
    EXPECT_EQ(n, st.tensors.size());
    EXPECT_NE(std::find(r.copied.begin(), r.copied.end(), "pos_embed (cls row)"), r.copied.end());
    EXPECT_NE(r.kept.find("64 grid rows"), std::string::npos) << r.kept;
    EXPECT_EQ(r.resized, "");

    const auto refused = [&](Config c) {
        Weights x = init_weights(c, 4);
        try {
            init_from(x, load_model(file).weights);
        } catch (const std::invalid_argument& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    Config narrow = big;
    narrow.width = 64;
    narrow.heads = 4;
    EXPECT_NE(refused(narrow).find("'cls_token' is (96,) in the file and (64,) in the model"), std::string::npos) << refused(narrow);
    Config mlp = big;
    mlp.mlp = 128;
    EXPECT_NE(refused(mlp).find("'blocks.0.mlp.fc1.weight'"), std::string::npos) << refused(mlp);
    Config shallow = big;
    shallow.depth = 5;
    EXPECT_NE(refused(shallow).find("'blocks.5.norm1.weight'"), std::string::npos) << refused(shallow);
}

// `train --init-from F --init-pos resize`: the position table's grid rows are the file's 4 x 4 grid resized to the
// model's 8 x 8 as timm does (resize_pos_embed with pos_rule_timm(), itself checked against PyTorch's
// F.interpolate by tests/parity/test_pos_embed.py), not the fresh initialisation; the cls row and every other tensor
// are copied as with keep, and an explicit InitPos::Keep is the default's behaviour.
TEST(Training, InitFromResizesTheFilesGridRowsAsTimmDoesWhenAsked) {
    const std::string file = crops_model_file("crops_resize.safetensors");
    const SafeTensors st = read_safetensors(file);
    const Config big = preset("scenes");
    const Weights fresh = init_weights(big, 4);
    Weights w = fresh, kept = fresh;
    const InitFrom r = init_from(w, load_model(file).weights, InitPos::Resize);
    const InitFrom k = init_from(kept, load_model(file).weights, InitPos::Keep);
    const Array& f = st.tensors.at("pos_embed");
    const size_t D = size_t(big.width);
    ASSERT_EQ(f.size(), size_t(17) * D) << "the file's table: cls and 4 x 4";
    const std::vector<float> want = resize_pos_embed(f.data(), 17, int(D), 1, 4, 4, 8, 8, pos_rule_timm());
    ASSERT_EQ(want.size(), size_t(65) * D);
    size_t n = 0;
    for_each_param(
        [&](const std::string& name, const auto& t, const auto& t0, const auto& tk) {
            SCOPED_TRACE(name);
            ++n;
            const Array& g = st.tensors.at(name);
            if (name != "pos_embed") {
                ASSERT_EQ(t.size(), g.size());
                for (size_t i = 0; i < t.size(); ++i) ASSERT_EQ(t.data()[i], g.data()[i]) << "element " << i;
                for (size_t i = 0; i < t.size(); ++i) ASSERT_EQ(tk.data()[i], g.data()[i]) << "keep: element " << i;
                return;
            }
            ASSERT_EQ(t.shape(0), size_t(65));
            for (size_t j = 0; j < D; ++j) ASSERT_EQ(t(0, j), f.data()[j]) << "the cls row";
            for (size_t j = 0; j < D; ++j) ASSERT_EQ(tk(0, j), f.data()[j]) << "keep: the cls row";
            for (size_t i = 1; i < 65; ++i) {
                size_t same_as_fresh = 0;
                for (size_t j = 0; j < D; ++j) {
                    ASSERT_EQ(t(i, j), want[i * D + j]) << "grid row " << i << ", column " << j;
                    ASSERT_EQ(tk(i, j), t0(i, j)) << "keep: grid row " << i;
                    same_as_fresh += t(i, j) == t0(i, j);
                }
                EXPECT_LT(same_as_fresh, D / 2) << "grid row " << i << " is mostly the fresh initialisation's";
            }
        },
        w, fresh, kept);
    EXPECT_EQ(n, st.tensors.size());
    EXPECT_EQ(r.copied.size(), n);
    EXPECT_NE(std::find(r.copied.begin(), r.copied.end(), "pos_embed (cls row)"), r.copied.end());
    EXPECT_EQ(r.kept, "") << "nothing keeps its initialisation";
    EXPECT_NE(r.resized.find("pos_embed's 64 grid rows (8x8) resized from the file's 4x4"), std::string::npos) << r.resized;
    EXPECT_NE(r.resized.find("bicubic, antialias"), std::string::npos) << r.resized;
    EXPECT_EQ(k.copied, r.copied);
    EXPECT_EQ(k.resized, "");
    EXPECT_EQ(k.kept, "pos_embed's 64 grid rows (8x8; the file's grid is 4x4)");
}
