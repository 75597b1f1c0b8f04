// Image-folder trees and TinyImageNet: see image_folder.h for the layouts.
// - Image files are those ending in .png, .jpg, .jpeg or .bmp (any case); other files in a class folder
//   (a README, a .txt) are ignored, and so are folders whose name starts with '.'.
// - image-folder: the tree's channel count is the first training image's (gray or gray+alpha -> 1,
//   otherwise 3; alpha is dropped) and every image is converted to it; test/ (else val/) is optional
//   (without one the set has no test split) and may hold fewer classes than train/, not others.
// - tinyimagenet: always 3 channels (about 1 in 50 TinyImageNet JPEGs is grayscale); val images come in
//   the order of val_annotations.txt; without words.txt the wnids are the class names.
// - Each image is decoded into a small buffer and appended to the split's pixels, reserved for the
//   whole split after the first image fixes the sample size.
#include "data/image_folder.h"

#include <stb_image.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "data/formats.h"
#include "tensor/error.h"

namespace bastion {
namespace {

namespace fs = std::filesystem;

// 16 Mpixel (4096x4096): a dataset held whole in memory has no larger images, and the cap keeps a corrupt
// header from making stb_image allocate gigabytes before it finds the data missing.
constexpr int64_t kMaxImagePixels = int64_t{1} << 24;
// No real PNG/JPEG/BMP packs more pixels per file byte than a 1-bit image through deflate's 1032:1
// limit (8 * 1032); a header claiming more is lying, and trusting it lets a 70-byte file make stb_image
// allocate and decode hundreds of MB (found by fuzz_image_folder). Small images always pass (floor).
constexpr int64_t kMaxPixelsPerByte = 8 * 1032;
constexpr int64_t kMinPixelBound = int64_t{1} << 16;
constexpr size_t kMaxQuotedLine = 80;  // characters of a bad line quoted in a message

enum class ImageFormat { kPng, kJpeg, kBmp };

// Only the three formats image trees use are handed to stb_image (which would also try GIF, PSD, HDR,
// PIC, PNM and TGA): less parser surface for a corrupt or hostile file to reach.
ImageFormat sniff_format(const uint8_t* bytes, size_t size, const std::string& file) {
  static constexpr uint8_t kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (size >= 8 && std::equal(kPngSignature, kPngSignature + 8, bytes)) return ImageFormat::kPng;
  if (size >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF) return ImageFormat::kJpeg;
  if (size >= 2 && bytes[0] == 'B' && bytes[1] == 'M') return ImageFormat::kBmp;
  BASTION_FAIL(file, ": cannot decode image: expected a PNG, JPEG or BMP signature at byte 0");
}

uint32_t read_be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Every PNG chunk (length, type, data, CRC) must fit in the file. stb_image grows its IDAT buffer to the
// length a chunk header claims before reading the data, so a 2 KB file claiming a 1 GB IDAT chunk made it
// reallocate 2 GB (found by fuzz_image_folder); checking lengths against the bytes present first bounds
// every allocation by the file size.
void check_png_chunks(const uint8_t* bytes, size_t size, const std::string& file) {
  size_t offset = 8;  // after the signature
  while (offset < size) {
    BASTION_CHECK(size - offset >= 12, file, ": PNG chunk at byte ", offset, " is truncated: expected 12 header and",
                  " CRC bytes, found ", size - offset);
    const uint32_t length = read_be32(bytes + offset);
    const std::string type(reinterpret_cast<const char*>(bytes + offset + 4), 4);
    BASTION_CHECK(length <= size - offset - 12, file, ": PNG chunk '", type, "' at byte ", offset, " claims ", length,
                  " data bytes but only ", size - offset - 12, " remain");
    offset += 12 + static_cast<size_t>(length);
    if (type == "IEND") return;
  }
}

std::string stb_reason() {
  const char* reason = stbi_failure_reason();
  return reason != nullptr ? reason : "unknown reason";
}

bool is_image_file(const fs::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".bmp";
}

// Sorted entries of `dir`: sub-folders (not starting with '.') or image files.
std::vector<fs::path> sorted_entries(const fs::path& dir, bool folders) {
  std::error_code error;
  BASTION_CHECK(fs::is_directory(dir, error), dir.string(), ": not a directory");
  std::vector<fs::path> out;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
    const fs::path& p = entry.path();
    std::error_code ignored;
    const bool keep = folders ? entry.is_directory(ignored) && p.filename().string()[0] != '.'
                              : entry.is_regular_file(ignored) && is_image_file(p);
    if (keep) out.push_back(p);
  }
  BASTION_CHECK(!error, dir.string(), ": cannot list: ", error.message());
  std::sort(out.begin(), out.end());
  return out;
}

void read_file_bytes(const fs::path& path, std::vector<uint8_t>& out) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  BASTION_CHECK(in.good(), path.string(), ": cannot open");
  const std::streamoff size = in.tellg();
  out.resize(static_cast<size_t>(std::max<std::streamoff>(size, 0)));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(out.data()), size);
  BASTION_CHECK(in.gcount() == size, path.string(), ": read ", in.gcount(), " bytes, expected ", size);
}

std::string read_text(const fs::path& path) {
  std::vector<uint8_t> bytes;
  read_file_bytes(path, bytes);
  return std::string(bytes.begin(), bytes.end());
}

// 1 for gray (or gray + alpha) images, 3 for colour.
int natural_channels(const std::vector<uint8_t>& bytes, const std::string& file) {
  int w = 0, h = 0, comp = 0;
  BASTION_CHECK(
      bytes.size() <= INT_MAX && stbi_info_from_memory(bytes.data(), static_cast<int>(bytes.size()), &w, &h, &comp),
      file, ": cannot decode image: ", stb_reason());
  return comp <= 2 ? 1 : 3;
}

struct Sample {
  fs::path file;
  int32_t label;
};

// The sample shape a split must have; 0 = taken from its first image.
struct SampleShape {
  int64_t channels = 0, height = 0, width = 0;
};

Dataset decode_samples(const std::vector<Sample>& samples, SampleShape shape, const std::string& shape_source) {
  Dataset d;
  std::vector<uint8_t> bytes;
  std::string source = shape_source;
  for (const Sample& sample : samples) {
    const std::string file = sample.file.string();
    read_file_bytes(sample.file, bytes);
    if (shape.channels == 0) shape.channels = natural_channels(bytes, file);
    const DecodedImage image = decode_image_bytes(bytes.data(), bytes.size(), file, static_cast<int>(shape.channels));
    if (shape.height == 0) {
      shape.height = image.height;
      shape.width = image.width;
      source = "the size of " + file;
      d.pixels.reserve(samples.size() * static_cast<size_t>(shape.channels * shape.height * shape.width));
    }
    BASTION_CHECK(image.height == shape.height && image.width == shape.width, file, ": image is ", image.height, "x",
                  image.width, ", expected ", shape.height, "x", shape.width, " (", source, ")");
    d.pixels.insert(d.pixels.end(), image.chw.begin(), image.chw.end());
    d.labels.push_back(sample.label);
  }
  d.channels = shape.channels;
  d.height = shape.height;
  d.width = shape.width;
  return d;
}

// Image files of each class folder, labelled by the folder's index in `classes`.
std::vector<Sample> class_samples(const fs::path& root, const std::vector<std::string>& classes,
                                  const std::string& sub = "") {
  std::vector<Sample> samples;
  for (size_t k = 0; k < classes.size(); ++k) {
    const fs::path folder = sub.empty() ? root / classes[k] : root / classes[k] / sub;
    const std::vector<fs::path> files = sorted_entries(folder, false);
    BASTION_CHECK(!files.empty(), folder.string(), ": no images (.png, .jpg, .jpeg, .bmp) in class folder");
    for (const fs::path& file : files) samples.push_back({file, static_cast<int32_t>(k)});
  }
  return samples;
}

// test/ (or val/) of an image-folder tree: each sub-folder must be one of the training classes.
std::vector<Sample> test_samples(const fs::path& test_dir, const std::vector<std::string>& classes) {
  std::vector<Sample> samples;
  for (const fs::path& folder : sorted_entries(test_dir, true)) {
    const std::string name = folder.filename().string();
    const auto found = std::find(classes.begin(), classes.end(), name);
    BASTION_CHECK(found != classes.end(), folder.string(), ": class folder '", name, "' is not among the ",
                  classes.size(), " classes of train/");
    const std::vector<Sample> one = class_samples(test_dir, {name});
    for (const Sample& s : one) samples.push_back({s.file, static_cast<int32_t>(found - classes.begin())});
  }
  return samples;
}

void set_classes(DatasetSplit& split, const std::vector<std::string>& names) {
  for (Dataset* d : {&split.train, &split.test}) {
    d->num_classes = static_cast<int64_t>(names.size());
    d->class_names = names;
  }
}

// Non-empty lines, trailing whitespace removed.
std::vector<std::string> text_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

// words.txt ("wnid<TAB>words") names the classes; the wnids themselves when it is absent.
std::vector<std::string> tinyimagenet_names(const fs::path& dir, const std::vector<std::string>& wnids) {
  std::error_code ignored;
  if (!fs::is_regular_file(dir / "words.txt", ignored)) return wnids;
  std::map<std::string, std::string> words;
  for (const std::string& line : text_lines(read_text(dir / "words.txt"))) {
    const size_t tab = line.find('\t');
    if (tab != std::string::npos) words[line.substr(0, tab)] = line.substr(tab + 1);
  }
  std::vector<std::string> names;
  for (const std::string& wnid : wnids) names.push_back(words.count(wnid) ? words[wnid] : wnid);
  return names;
}

std::vector<Sample> tinyimagenet_val(const fs::path& dir, const std::vector<std::string>& wnids) {
  const fs::path annotations = dir / "val" / "val_annotations.txt";
  std::map<std::string, int32_t> label_of;
  for (size_t k = 0; k < wnids.size(); ++k) label_of[wnids[k]] = static_cast<int32_t>(k);
  std::vector<Sample> samples;
  for (const auto& [image, wnid] : parse_val_annotations(read_text(annotations), annotations.string())) {
    const auto found = label_of.find(wnid);
    BASTION_CHECK(found != label_of.end(), annotations.string(), ": image ", image, " has wnid '", wnid,
                  "', which wnids.txt does not list");
    samples.push_back({dir / "val" / "images" / image, found->second});
  }
  return samples;
}

}  // namespace

DecodedImage decode_image_bytes(const uint8_t* bytes, size_t size, const std::string& file, int channels) {
  BASTION_CHECK(channels == 1 || channels == 3, file, ": decode_image_bytes: channels must be 1 or 3, got ", channels);
  BASTION_CHECK(bytes != nullptr && size > 0 && size <= INT_MAX, file, ": image file of ", size,
                " bytes: expected 1 to ", INT_MAX);
  if (sniff_format(bytes, size, file) == ImageFormat::kPng) check_png_chunks(bytes, size, file);
  int w = 0, h = 0, comp = 0;
  BASTION_CHECK(stbi_info_from_memory(bytes, static_cast<int>(size), &w, &h, &comp), file,
                ": cannot decode image: ", stb_reason());
  BASTION_CHECK(w > 0 && h > 0 && int64_t{w} * h <= kMaxImagePixels, file, ": image header says ", w, "x", h,
                ": expected at most ", kMaxImagePixels, " pixels");
  const int64_t plausible = std::max(kMinPixelBound, static_cast<int64_t>(size) * kMaxPixelsPerByte);
  BASTION_CHECK(int64_t{w} * h <= plausible, file, ": image header says ", w, "x", h, " but the file has only ", size,
                " bytes: expected at most ", plausible, " pixels for that size");
  std::unique_ptr<stbi_uc, void (*)(void*)> hwc(
      stbi_load_from_memory(bytes, static_cast<int>(size), &w, &h, &comp, channels), &stbi_image_free);
  BASTION_CHECK(hwc != nullptr, file, ": cannot decode image: ", stb_reason());
  DecodedImage image;
  image.channels = channels;
  image.height = h;
  image.width = w;
  const int64_t plane = int64_t{h} * w;
  image.chw.resize(static_cast<size_t>(plane * channels));
  for (int64_t i = 0; i < plane; ++i)  // stb returns interleaved HWC; the Dataset wants planar CHW
    for (int64_t c = 0; c < channels; ++c) image.chw[c * plane + i] = hwc.get()[i * channels + c];
  return image;
}

std::vector<std::pair<std::string, std::string>> parse_val_annotations(const std::string& text,
                                                                       const std::string& file) {
  std::vector<std::pair<std::string, std::string>> entries;
  size_t line_number = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string line = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const size_t tab = line.find('\t');
    const std::string image = line.substr(0, tab);
    const std::string wnid = tab == std::string::npos ? "" : line.substr(tab + 1, line.find('\t', tab + 1) - tab - 1);
    BASTION_CHECK(!image.empty() && !wnid.empty() && image.find('/') == std::string::npos, file, ":", line_number,
                  ": expected at least 2 tab-separated fields (image file name, wnid), found '",
                  line.substr(0, kMaxQuotedLine), line.size() > kMaxQuotedLine ? "...'" : "'");
    entries.emplace_back(image, wnid);
  }
  return entries;
}

DatasetSplit load_image_folder_dir(const fs::path& dir) {
  std::vector<std::string> classes;
  for (const fs::path& folder : sorted_entries(dir / "train", true)) classes.push_back(folder.filename().string());
  BASTION_CHECK(!classes.empty(), (dir / "train").string(), ": no class folders: expected train/<class>/*.png|jpg");
  DatasetSplit split;
  split.train = decode_samples(class_samples(dir / "train", classes), {}, "");
  std::error_code ignored;
  const fs::path test_dir = fs::is_directory(dir / "test", ignored) ? dir / "test" : dir / "val";
  if (fs::is_directory(test_dir, ignored)) {
    const SampleShape shape{split.train.channels, split.train.height, split.train.width};
    split.test = decode_samples(test_samples(test_dir, classes), shape, "the size of the training images");
  }
  set_classes(split, classes);
  return split;
}

DatasetSplit load_tinyimagenet_dir(const fs::path& dir) {
  const std::vector<std::string> wnids = text_lines(read_text(dir / "wnids.txt"));
  BASTION_CHECK(!wnids.empty(), (dir / "wnids.txt").string(), ": expected one wnid per line, found none");
  std::vector<std::string> sorted = wnids;
  std::sort(sorted.begin(), sorted.end());
  const auto repeated = std::adjacent_find(sorted.begin(), sorted.end());
  BASTION_CHECK(repeated == sorted.end(), (dir / "wnids.txt").string(), ": wnid '",
                repeated == sorted.end() ? "" : *repeated, "' is listed twice: expected each class once");
  DatasetSplit split;
  split.train = decode_samples(class_samples(dir / "train", wnids, "images"), {3, 0, 0}, "");
  const SampleShape shape{3, split.train.height, split.train.width};
  split.test = decode_samples(tinyimagenet_val(dir, wnids), shape, "the size of the training images");
  set_classes(split, tinyimagenet_names(dir, wnids));
  return split;
}

}  // namespace bastion
