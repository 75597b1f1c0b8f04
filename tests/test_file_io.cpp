// write_file_atomic: the file appears whole or not at all, a failed write keeps the previous file and
// removes its temporary, failures name the path and the reason; the stale-temporary sweep.
#include <gtest/gtest.h>

#include <cerrno>

#include "tensor/file_io.h"
#include "tests/test_support.h"

using namespace bastion;
using namespace bastion::testing;

using FileIoTest = TempDirTest;

TEST_F(FileIoTest, WritesAndReplacesWithoutLeavingTheTemporary) {
  const fs::path file = dir_ / "out.csv";
  write_file_atomic(file.string(), "a,b\n1,2\n");
  EXPECT_EQ(read_raw(file), (Bytes{'a', ',', 'b', '\n', '1', ',', '2', '\n'}));
  write_file_atomic(file.string(), "x");
  EXPECT_EQ(read_raw(file), Bytes{'x'});
  EXPECT_FALSE(fs::exists(temporary_path(file.string())));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(FileIoTest, MissingFolderIsAnErrorNamingThePath) {
  const fs::path file = dir_ / "no-such-folder" / "out.csv";
  expect_error([&] { write_file_atomic(file.string(), "x"); },
               {"cannot write", "no-such-folder/out.csv': creating", "out.csv.tmp.", "No such file"});
  EXPECT_FALSE(fs::exists(file));
}

// A writer that fails halfway as a full disk does: the old file stays, the half-written temporary goes.
TEST_F(FileIoTest, FailedWriteKeepsThePreviousFileAndRemovesTheTemporary) {
  const fs::path file = dir_ / "checkpoint.bin";
  write_file_atomic(file.string(), "old");
  const FileWriter half_then_full = [](std::FILE* f) {
    write_bytes(f, "new-", 4);
    errno = ENOSPC;
    return false;
  };
  expect_error(
      [&] { write_file_atomic(file.string(), half_then_full); },
      {"cannot write '" + file.string() + "': writing", "No space left on device (the disk is full)", "is unchanged"});
  EXPECT_EQ(read_raw(file), (Bytes{'o', 'l', 'd'}));
  EXPECT_FALSE(fs::exists(temporary_path(file.string())));
}

TEST_F(FileIoTest, WriterThatThrowsLeavesNoTemporary) {
  const fs::path file = dir_ / "out.csv";
  EXPECT_THROW(write_file_atomic(file.string(), [](std::FILE*) -> bool { throw Error("boom"); }), Error);
  EXPECT_FALSE(fs::exists(file));
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(FileIoTest, SweepRemovesOnlyTemporariesOfThisFolder) {
  for (const char* name : {"rounds.csv.tmp.123", "checkpoint.safetensors.tmp.9", "keep.tmp", "notes.tmp.x", "x.tmp.",
                           ".tmp.5", "rounds.csv", "sub/rounds.csv.tmp.4"})
    write_text(dir_ / name, "x");
  EXPECT_EQ(remove_stale_temporaries(dir_.string()), 2);
  for (const char* kept : {"keep.tmp", "notes.tmp.x", "x.tmp.", ".tmp.5", "rounds.csv", "sub/rounds.csv.tmp.4"})
    EXPECT_TRUE(fs::exists(dir_ / kept)) << kept;
  EXPECT_FALSE(fs::exists(dir_ / "rounds.csv.tmp.123"));
  EXPECT_EQ(remove_stale_temporaries((dir_ / "absent").string()), 0);
}

// A parameterised suite's names hold '/': its folder must still sit directly in the temp folder, so that
// TearDown's remove_all takes all of it (it used to leave a "bastion-<pid>-Prefix" folder per test).
class TempDirNames : public TempDirTest, public ::testing::WithParamInterface<int> {};

TEST_P(TempDirNames, FolderSitsDirectlyInTheTempFolder) {
  EXPECT_EQ(dir_.parent_path(), fs::temp_directory_path());
  EXPECT_TRUE(fs::is_directory(dir_));
}

INSTANTIATE_TEST_SUITE_P(Prefix, TempDirNames, ::testing::Values(0));
