// Backdoor triggers: see triggers.h for the table of names, geometry, value and space. Each builder
// lists the pixels of one source's pattern; make_trigger then checks that every pixel fits the image.
#include "data/triggers.h"

#include <charconv>
#include <sstream>

#include "tensor/error.h"

namespace bastion {
namespace {

constexpr int64_t kEveryChannel = -1;

// Appends the rectangle rows [row, row + rows) × cols [col, col + cols) with `value`.
void add_rect(std::vector<TriggerPixel>& out, int64_t channel, int64_t row, int64_t col, int64_t rows, int64_t cols,
              float value) {
  for (int64_t r = row; r < row + rows; ++r)
    for (int64_t c = col; c < col + cols; ++c) out.push_back({channel, r, c, value});
}

// SPMC `Attack/backdoor/utils.py` (IMPLEMENTATION-FACTS §2.4): two 3-pixel segments on rows 0 and 2
// with a gap at column 3, channel 0 only, written as 1.0 after normalisation.
std::vector<TriggerPixel> spmc_pixels() {
  std::vector<TriggerPixel> out;
  for (int64_t row : {0, 2})
    for (int64_t col : {0, 4}) add_rect(out, 0, row, col, 1, 3, 1.0f);
  return out;
}

// FedCPA `datasets.py` TriggerHandler: a white 5×5 image pasted at (W-5, H-5) before augmentation.
std::vector<TriggerPixel> fedcpa_pixels(int64_t height, int64_t width) {
  std::vector<TriggerPixel> out;
  add_rect(out, kEveryChannel, height - 5, width - 5, 5, 5, 1.0f);
  return out;
}

// BapFL `utils/utils.py` get_poison_batch: 16 fixed positions, the same at every image size.
std::vector<TriggerPixel> bapfl_pixels() {
  std::vector<TriggerPixel> out;
  for (int64_t row : {0, 3})
    for (int64_t col : {0, 6}) add_rect(out, kEveryChannel, row, col, 1, 4, 1.0f);
  return out;
}

// DBA `utils/{mnist,cifar,tiny}_params.yaml` (IMPLEMENTATION-FACTS §6.2): four bars chosen by the
// image height, because DBA ships one pattern per dataset rather than a rule.
struct DbaGeometry {
  int64_t bar_rows, bar_cols;
  int64_t rows[2], cols[2];  // top-left corners: (rows[K / 2], cols[K % 2]) for part K
};

DbaGeometry dba_geometry(int64_t height) {
  switch (height) {
    case 28:
      return {1, 4, {0, 3}, {0, 6}};  // mnist_params.yaml: 1×4, gap 2
    case 32:
      return {1, 6, {0, 4}, {0, 9}};  // cifar_params.yaml: 1×6, gap 3
    case 64:
      return {2, 10, {0, 4}, {0, 12}};  // tiny_params.yaml: 2×10, gap 2
    default:
      BASTION_FAIL("trigger 'dba': no DBA geometry for images of height ", height,
                   " (DBA defines 28 (MNIST), 32 (CIFAR) and 64 (TinyImageNet))");
  }
}

void add_dba_part(std::vector<TriggerPixel>& out, const DbaGeometry& g, int64_t part) {
  add_rect(out, kEveryChannel, g.rows[part / 2], g.cols[part % 2], g.bar_rows, g.bar_cols, 1.0f);
}

// FederatedScope `backdoor_utils.py` _squareTrigger with distance 1 and trig_h = int(0.1·H).
std::vector<TriggerPixel> square_pixels(int64_t height, int64_t width) {
  const int64_t rows = height / 10, cols = width / 10;
  BASTION_CHECK(rows > 0 && cols > 0, "trigger 'square': a ", height, "x", width,
                " image gives an empty floor(0.1H) x floor(0.1W) square; it needs H, W >= 10");
  std::vector<TriggerPixel> out;
  add_rect(out, kEveryChannel, height - 1 - rows, width - 1 - cols, rows, cols, 1.0f);
  return out;
}

// FederatedScope `backdoor_utils.py` _gridTriger, copied value by value: a checker whose top-left
// pixel (H-3, W-3) the source sets black although the alternation would make it white.
std::vector<TriggerPixel> grid_pixels(int64_t height, int64_t width) {
  constexpr float kGrid[3][3] = {{0, 0, 1}, {0, 1, 0}, {1, 0, 1}};  // rows H-3..H-1, cols W-3..W-1
  std::vector<TriggerPixel> out;
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t c = 0; c < 3; ++c) out.push_back({kEveryChannel, height - 3 + r, width - 3 + c, kGrid[r][c]});
  return out;
}

std::string joined_names() {
  std::ostringstream s;
  const std::vector<std::string> names = trigger_names();
  for (size_t i = 0; i < names.size(); ++i) s << (i ? ", " : "") << names[i];
  return s.str();
}

// "dba:K" -> K; throws on anything but a single integer in 0..3.
int64_t parse_dba_part(const std::string& name) {
  const std::string digits = name.substr(4);
  int64_t part = -1;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), part);
  BASTION_CHECK(error == std::errc() && end == digits.data() + digits.size() && !digits.empty(), "trigger '", name,
                "': the DBA part must be an integer 0..3");
  BASTION_CHECK(0 <= part && part <= 3, "trigger '", name, "': DBA part ", part,
                " out of range 0..3 (malicious client j uses part j mod 4)");
  return part;
}

std::vector<TriggerPixel> resolve_pixels(const std::string& name, int64_t height, int64_t width) {
  if (name == "spmc") return spmc_pixels();
  if (name == "fedcpa") return fedcpa_pixels(height, width);
  if (name == "bapfl") return bapfl_pixels();
  if (name == "square") return square_pixels(height, width);
  if (name == "grid") return grid_pixels(height, width);
  if (name == "dba" || name == "dba-global") {
    const DbaGeometry g = dba_geometry(height);
    std::vector<TriggerPixel> out;
    for (int64_t part = 0; part < 4; ++part) add_dba_part(out, g, part);
    return out;
  }
  if (name.rfind("dba:", 0) == 0) {
    const int64_t part = parse_dba_part(name);
    std::vector<TriggerPixel> out;
    add_dba_part(out, dba_geometry(height), part);
    return out;
  }
  BASTION_FAIL("unknown trigger '", name, "'; valid names: ", joined_names());
}

}  // namespace

std::vector<std::string> trigger_names() {
  return {"spmc", "fedcpa", "bapfl", "dba", "dba-global", "dba:0", "dba:1", "dba:2", "dba:3", "square", "grid"};
}

TriggerSpace trigger_space(const std::string& name) {
  return name == "spmc" ? TriggerSpace::kNormalized : TriggerSpace::kRaw;
}

Trigger make_trigger(const std::string& name, int64_t channels, int64_t height, int64_t width) {
  BASTION_CHECK(channels > 0 && height > 0 && width > 0, "trigger '", name, "': bad image shape ", channels, "x",
                height, "x", width);
  Trigger trigger;
  trigger.name = name;
  trigger.space = trigger_space(name);
  trigger.pixels = resolve_pixels(name, height, width);
  trigger.channels = channels;
  trigger.height = height;
  trigger.width = width;
  for (const TriggerPixel& p : trigger.pixels) {
    BASTION_CHECK(0 <= p.row && p.row < height && 0 <= p.col && p.col < width && p.channel < channels, "trigger '",
                  name, "' does not fit a ", channels, "x", height, "x", width, " image: it needs pixel (channel ",
                  p.channel, ", row ", p.row, ", col ", p.col, ")");
  }
  return trigger;
}

void apply_trigger(float* image, int64_t channels, int64_t height, int64_t width, const Trigger& trigger) {
  BASTION_CHECK(channels == trigger.channels && height == trigger.height && width == trigger.width,
                "apply_trigger: trigger '", trigger.name, "' was made for ", trigger.channels, "x", trigger.height, "x",
                trigger.width, " images but the image is ", channels, "x", height, "x", width);
  const int64_t plane = height * width;
  for (const TriggerPixel& p : trigger.pixels) {
    const int64_t offset = p.row * width + p.col;
    if (p.channel == kEveryChannel) {
      for (int64_t c = 0; c < channels; ++c) image[c * plane + offset] = p.value;
    } else {
      image[p.channel * plane + offset] = p.value;
    }
  }
}

}  // namespace bastion
