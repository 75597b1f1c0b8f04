// `bastion data get` (data/download.h) against a local HTTP server on 127.0.0.1 (tests/http_test_server.h):
// fetch + SHA-256, a refused checksum, an interrupted download resumed with a Range request, a server that
// ignores ranges, offline and HTTP errors in one line, archives verified then extracted (and a member that
// would escape the folder refused), and the CLI getting MNIST from a mirror of ../shared/datasets.
#include <archive.h>
#include <archive_entry.h>

#include <algorithm>

#include "data/download.h"
#include "tests/http_test_server.h"
#include "tests/test_support.h"

namespace bastion {
namespace {

using testing::HttpTestServer;

std::string text_of(const std::filesystem::path& path) {
  const testing::Bytes bytes = testing::read_raw(path);
  return std::string(bytes.begin(), bytes.end());
}

// Bytes that differ at every offset, so a resumed file stitched at the wrong place cannot pass.
std::string pattern(size_t n) {
  std::string bytes(n, '\0');
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<char>((i * 131 + i / 251) & 0xff);
  return bytes;
}

void write_tar_gz(const std::filesystem::path& path, const std::vector<std::pair<std::string, std::string>>& members) {
  archive* a = archive_write_new();
  archive_write_add_filter_gzip(a);
  archive_write_set_format_pax_restricted(a);
  ASSERT_EQ(archive_write_open_filename(a, path.c_str()), ARCHIVE_OK);
  for (const auto& [name, body] : members) {
    archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, name.c_str());
    archive_entry_set_size(entry, static_cast<la_int64_t>(body.size()));
    archive_entry_set_filetype(entry, AE_IFREG);
    archive_entry_set_perm(entry, 0644);
    archive_write_header(a, entry);
    archive_write_data(a, body.data(), body.size());
    archive_entry_free(entry);
  }
  archive_write_close(a);
  archive_write_free(a);
}

class DataDownload : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    served_ = dir_ / "served";
    std::filesystem::create_directories(served_);
    body_ = pattern(200000);
    testing::write_text(served_ / "a.bin", body_);
    server_ = std::make_unique<HttpTestServer>(served_);
    options_.mirror = server_->url();
    options_.retries = 0;
    options_.log = [this](const std::string& line) { log_ += line + "\n"; };
  }
  void TearDown() override {
    server_.reset();
    TempDirTest::TearDown();
  }
  // A source of one file whose canonical URL is never contacted: the tests fetch it from the mirror.
  DatasetSource source_of(const std::string& name, const std::string& sha256, int64_t bytes,
                          bool unpack = false) const {
    return {"test", "test-set", {{"https://example.invalid/data/" + name, sha256, bytes, unpack}}, "test data"};
  }
  DatasetSource plain_source() const {
    return source_of("a.bin", sha256_file((served_ / "a.bin").string()), static_cast<int64_t>(body_.size()));
  }
  std::filesystem::path root() const { return dir_ / "root"; }

  std::filesystem::path served_;
  std::string body_, log_;
  std::unique_ptr<HttpTestServer> server_;
  DownloadOptions options_;
};

TEST(Sha256File, KnownDigests) {
  const auto dir = std::filesystem::temp_directory_path() / ("bastion-sha-" + std::to_string(getpid()));
  testing::write_text(dir / "abc", "abc");
  testing::write_text(dir / "empty", "");
  EXPECT_EQ(sha256_file((dir / "abc").string()), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_file((dir / "empty").string()), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  std::filesystem::remove_all(dir);
  testing::expect_error([&] { sha256_file((dir / "gone").string()); }, {"cannot read", "gone"});
}

TEST_F(DataDownload, FetchesVerifiesAndKeepsAFinishedFile) {
  const std::string folder = download_dataset(plain_source(), root().string(), options_);
  EXPECT_EQ(folder, (root() / "test-set").string());
  EXPECT_EQ(text_of(root() / "test-set" / "a.bin"), body_);
  EXPECT_FALSE(std::filesystem::exists(root() / "test-set" / "a.bin.part"));
  ASSERT_EQ(server_->requests(), std::vector<std::string>{"GET /a.bin"});
  download_dataset(plain_source(), root().string(), options_);  // already there: verified, not fetched
  EXPECT_EQ(server_->requests().size(), 1u);
  EXPECT_NE(log_.find("a.bin: already there, sha256 ok"), std::string::npos) << log_;
}

TEST_F(DataDownload, AChecksumMismatchIsRefusedAndNothingIsKept) {
  const DatasetSource wrong = source_of("a.bin", std::string(64, '0'), static_cast<int64_t>(body_.size()));
  testing::expect_error([&] { download_dataset(wrong, root().string(), options_); },
                        {"refused " + server_->url("/a.bin"), "sha256", std::string(64, '0'), "removed"});
  EXPECT_FALSE(std::filesystem::exists(root() / "test-set" / "a.bin"));
  EXPECT_FALSE(std::filesystem::exists(root() / "test-set" / "a.bin.part"));
  // A file of the wrong size is refused the same way, even before its hash would be compared.
  const DatasetSource longer = source_of("a.bin", sha256_file((served_ / "a.bin").string()), 200001);
  testing::expect_error([&] { download_dataset(longer, root().string(), options_); }, {"refused", "200 kB"});
  // A file already in place with another checksum is the user's: named, never overwritten or removed.
  testing::write_text(root() / "test-set" / "a.bin", "mine");
  testing::expect_error([&] { download_dataset(plain_source(), root().string(), options_); },
                        {"a.bin is already there but its sha256 is", "remove it and run again"});
  EXPECT_EQ(text_of(root() / "test-set" / "a.bin"), "mine");
}

TEST_F(DataDownload, AnInterruptedDownloadResumesFromWhereItStopped) {
  server_->break_next_after(30000);
  testing::expect_error([&] { download_dataset(plain_source(), root().string(), options_); },
                        {"broke off", server_->url("/a.bin"), "a.bin.part", "run the same command again to resume"});
  EXPECT_EQ(std::filesystem::file_size(root() / "test-set" / "a.bin.part"), 30000u);
  download_dataset(plain_source(), root().string(), options_);  // the same command again
  const std::vector<std::string> requests = server_->requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[1], "GET /a.bin range=30000-");
  EXPECT_EQ(text_of(root() / "test-set" / "a.bin"), body_);
  EXPECT_FALSE(std::filesystem::exists(root() / "test-set" / "a.bin.part"));
}

TEST_F(DataDownload, RetriesResumeWithinOneCommand) {
  server_->break_next_after(123457);
  options_.retries = 1;
  download_dataset(plain_source(), root().string(), options_);
  const std::vector<std::string> requests = server_->requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[1], "GET /a.bin range=123457-");
  EXPECT_EQ(text_of(root() / "test-set" / "a.bin"), body_);
  EXPECT_NE(log_.find("interrupted at 123 kB, resuming"), std::string::npos) << log_;
}

TEST_F(DataDownload, AServerThatIgnoresTheRangeRestartsTheFile) {
  testing::write_text(root() / "test-set" / "a.bin.part", std::string(1000, 'x'));  // a stale partial file
  server_->ignore_ranges(true);
  download_dataset(plain_source(), root().string(), options_);
  EXPECT_EQ(server_->requests(), std::vector<std::string>{"GET /a.bin range=1000-"});
  EXPECT_EQ(text_of(root() / "test-set" / "a.bin"), body_);  // the whole body, not appended to the stale bytes
}

TEST_F(DataDownload, APartThatIsAlreadyWholeIsVerifiedNotFetchedAgain) {
  testing::write_text(root() / "test-set" / "a.bin.part", body_);
  download_dataset(plain_source(), root().string(), options_);  // the server answers 416 for bytes=200000-
  EXPECT_EQ(text_of(root() / "test-set" / "a.bin"), body_);
}

TEST_F(DataDownload, OfflineAndHttpErrorsAreOneLineNamingTheUrl) {
  options_.mirror = "http://127.0.0.1:" + std::to_string(testing::closed_port());
  try {
    download_dataset(plain_source(), root().string(), options_);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    const std::string message = without_source_locations(e.what());
    EXPECT_NE(message.find("cannot reach " + options_.mirror + "/a.bin"), std::string::npos) << message;
    EXPECT_NE(message.find("offline?"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  options_.mirror = server_->url();
  const DatasetSource missing = source_of("missing.bin", std::string(64, '0'), 10);
  testing::expect_error([&] { download_dataset(missing, root().string(), options_); },
                        {"cannot get " + server_->url("/missing.bin") + ": HTTP 404"});
}

TEST_F(DataDownload, ArchivesAreVerifiedThenExtracted) {
  write_tar_gz(served_ / "set.tar.gz", {{"set-bin/x.bin", pattern(5000)}, {"set-bin/readme.txt", "hello\n"}});
  const DatasetSource source = source_of("set.tar.gz", sha256_file((served_ / "set.tar.gz").string()), 0, true);
  download_dataset(source, root().string(), options_);
  EXPECT_EQ(text_of(root() / "test-set" / "set-bin" / "x.bin"), pattern(5000));
  EXPECT_EQ(text_of(root() / "test-set" / "set-bin" / "readme.txt"), "hello\n");
  EXPECT_FALSE(std::filesystem::exists(root() / "test-set" / "set.tar.gz.part"));  // the archive is not kept
  EXPECT_NE(log_.find("2 files extracted"), std::string::npos) << log_;
  download_dataset(source, root().string(), options_);  // its checksum was recorded: nothing fetched again
  EXPECT_EQ(server_->requests().size(), 1u);
}

TEST_F(DataDownload, ArchiveMembersOutsideTheFolderAreRefused) {
  write_tar_gz(served_ / "evil.tar.gz", {{"../evil.txt", "x"}});
  const DatasetSource source = source_of("evil.tar.gz", sha256_file((served_ / "evil.tar.gz").string()), 0, true);
  testing::expect_error([&] { download_dataset(source, root().string(), options_); },
                        {"'../evil.txt' would be written outside the dataset folder"});
  EXPECT_FALSE(std::filesystem::exists(root() / "evil.txt"));
  testing::write_text(served_ / "bad.tar.gz", "not an archive");  // its checksum matches: the archive is bad
  const DatasetSource bad = source_of("bad.tar.gz", sha256_file((served_ / "bad.tar.gz").string()), 0, true);
  testing::expect_error([&] { download_dataset(bad, root().string(), options_); }, {"bad.tar.gz"});
}

TEST(DatasetSources, EveryDownloadIsARegisteredSetWithAChecksumAndTheOthersSayHowToGetThem) {
  const std::vector<std::string> registered = dataset_names();
  for (const std::string& name : downloadable_dataset_names()) {
    EXPECT_NE(std::find(registered.begin(), registered.end(), name), registered.end()) << name;
    for (const RemoteFile& file : dataset_source(name).files) {
      EXPECT_EQ(file.sha256.size(), 64u) << file.url;
      EXPECT_EQ(file.sha256.find_first_not_of("0123456789abcdef"), std::string::npos) << file.url;
      EXPECT_GT(file.bytes, 0) << file.url;
      EXPECT_EQ(file.url.rfind("http", 0), 0u) << file.url;
    }
  }
  testing::expect_error([] { dataset_source("wisdm"); }, {"cannot download 'wisdm'", "fordham", "It downloads: mnist"});
  testing::expect_error([] { dataset_source("nope"); }, {"not a registered dataset"});
}

// The CLI end to end: MNIST from a mirror that serves ../shared/datasets/mnist, checked against the
// published checksums, then read by the loader from the folder `data get` wrote.
TEST_F(DataDownload, TheCliGetsMnistFromAMirrorAndTheLoaderReadsIt) {
  if (!testing::dataset_installed("mnist")) GTEST_SKIP() << "MNIST not installed (BASTION_DATA=../shared/datasets)";
  HttpTestServer mirror(find_dataset_dir("mnist", ""));
  const std::string data = (dir_ / "data").string();
  const auto got = testing::run_bastion("data get mnist --mirror " + mirror.url() + " --data-dir " + data);
  ASSERT_EQ(got.exit_code, 0) << got.output;
  EXPECT_NE(got.output.find("train-images-idx3-ubyte.gz: 9.9 MB, sha256 ok"), std::string::npos) << got.output;
  EXPECT_NE(got.output.find("mnist: ready in " + data + "/mnist"), std::string::npos) << got.output;
  EXPECT_EQ(got.output.find('\r'), std::string::npos) << "no progress bar when stderr is not a terminal";
  const DatasetSplit split = load_dataset("mnist", data);
  EXPECT_EQ(split.train.size(), 60000);
  EXPECT_EQ(split.test.size(), 10000);

  const auto listed = testing::run_bastion("data get --data-dir " + data);
  EXPECT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_NE(listed.output.find("cifar10"), std::string::npos) << listed.output;
  const auto refused = testing::run_bastion("data get mnist wisdm --data-dir " + (dir_ / "other").string());
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find("cannot download 'wisdm'"), std::string::npos) << refused.output;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "other" / "mnist")) << "names are checked before any download";
}

}  // namespace
}  // namespace bastion
