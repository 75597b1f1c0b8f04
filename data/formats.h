// Per-format loaders behind the dataset table (data/dataset.cpp). Each takes the folder that
// find_dataset_dir() chose and returns the train and test splits, with every Dataset field filled
// except `name`, `mean` and `std`, which the table sets (a loader may leave C/H/W to the file).
// Each format's parser also has an in-memory entry point (bytes + a file name for messages), declared
// in its own header, so the fuzzers in tests/fuzz/ drive exactly the code the loaders run.
// Error contract (as data/idx.h): every problem throws bastion::Error naming the file, what was
// expected, what was found and, for binary formats, the byte offset.
#pragma once

#include <filesystem>

#include "data/dataset.h"

namespace bastion {

DatasetSplit load_idx_mnist_dir(const std::filesystem::path& dir);       // data/dataset.cpp (mnist, fmnist)
DatasetSplit load_emnist_byclass_dir(const std::filesystem::path& dir);  // data/emnist.cpp
DatasetSplit load_emnist_letters_dir(const std::filesystem::path& dir);  // data/emnist.cpp
DatasetSplit load_cifar10_dir(const std::filesystem::path& dir);         // data/cifar.cpp
DatasetSplit load_cifar100_dir(const std::filesystem::path& dir);        // data/cifar.cpp
DatasetSplit load_svhn_dir(const std::filesystem::path& dir);            // data/svhn.cpp
DatasetSplit load_tinyimagenet_dir(const std::filesystem::path& dir);    // data/image_folder.cpp
DatasetSplit load_image_folder_dir(const std::filesystem::path& dir);    // data/image_folder.cpp
DatasetSplit load_wisdm_raw_dir(const std::filesystem::path& dir);       // data/wisdm.cpp
DatasetSplit load_wisdm_features_dir(const std::filesystem::path& dir);  // data/wisdm.cpp
DatasetSplit load_digits_dir(const std::filesystem::path& dir);          // data/digits.cpp
DatasetSplit load_synthetic_default();                                   // data/synthetic.cpp

}  // namespace bastion
