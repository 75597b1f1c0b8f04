// Image-folder trees (torchvision ImageFolder layout) and TinyImageNet, decoded through stb_image.
//   image-folder:  <dir>/train/<class>/*.{png,jpg,jpeg,bmp} and <dir>/test/<class>/... (or val/); classes
//                  are the sorted subfolder names of train/, and test/ must use the same names.
//   tinyimagenet:  <dir>/wnids.txt (class order), <dir>/train/<wnid>/images/*.JPEG,
//                  <dir>/val/images/*.JPEG labelled by <dir>/val/val_annotations.txt
//                  (tab-separated: file, wnid, x0, y0, x1, y1); words.txt, if present, names the classes.
// Every image of a set must have the same H×W; grayscale JPEGs are expanded to 3 channels (and colour
// images of a 1-channel tree reduced) by stb_image's channel conversion. Files are visited in sorted
// name order, so sample order is the same on every machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace bastion {

struct DecodedImage {
  int64_t channels = 0, height = 0, width = 0;
  std::vector<uint8_t> chw;  // channels*height*width, planar (C, H, W)
};

// Decodes one PNG/JPEG/BMP held in memory into `channels` (1 or 3) 8-bit planes. Throws naming `file`
// and stb_image's reason on anything it cannot decode.
DecodedImage decode_image_bytes(const uint8_t* bytes, size_t size, const std::string& file, int channels);

// Parses the text of TinyImageNet's val_annotations.txt into (image file name, wnid) pairs, in file
// order. Throws naming `file` and the 1-based line on a line without at least two tab-separated fields.
std::vector<std::pair<std::string, std::string>> parse_val_annotations(const std::string& text,
                                                                       const std::string& file);

}  // namespace bastion
