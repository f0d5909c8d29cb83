// Image datasets in IDX files (gzipped or not), e.g. Debian's dataset-fashion-mnist.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/model.h"

namespace vit {

struct Dataset {
    std::vector<uint8_t> images;  // (N, rows, cols)
    std::vector<uint8_t> labels;  // (N)
    int n = 0, rows = 0, cols = 0;
};
Dataset load_idx(const std::string& images_path, const std::string& labels_path);
// The same from the files' bytes (gzipped or not); the paths name them in errors.
Dataset parse_idx(const std::string& images, const std::string& labels, const std::string& images_path,
                  const std::string& labels_path);
// dir/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]
Dataset load_fashion_mnist(const std::string& dir, bool train);
std::string default_fashion_mnist_dir();

// Normalized input (1, S, S) of one dataset image for a 1-channel model
// (resized if the model's image size differs; to h x w when both are > 0, a run at another size).
Tensor3 dataset_input(const Dataset& d, int i, const Config& c, int h = 0, int w = 0);

}  // namespace vit
