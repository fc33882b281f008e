// Security::Load's checks of the credential files themselves (the refusals
// against a running server are in //tests:security_test and
// //tests:hostile_input_test).

#include "common/auth.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace {

std::string Tmp() { return getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp"; }

std::string WriteWithMode(const std::string& name, mode_t mode) {
  const std::string path = Tmp() + "/" + name;
  std::ofstream(path) << "-----BEGIN PLACEHOLDER-----\n";  // Load does not parse PEM
  EXPECT_EQ(chmod(path.c_str(), mode), 0) << path;
  return path;
}

TEST(Security, TlsKeyReadableByOthersIsRefusedNamingTheFileAndTheFix) {
  SecurityOptions o;
  o.tls_cert = WriteWithMode("cert.pem", 0644);
  o.tls_ca = WriteWithMode("ca.pem", 0644);
  for (mode_t bad : {0644, 0640, 0604, 0620, 0602}) {
    o.tls_key = WriteWithMode("key.pem", bad);
    absl::StatusOr<Security> s = Security::Load(o);
    ASSERT_FALSE(s.ok()) << std::oct << bad;
    EXPECT_TRUE(absl::IsPermissionDenied(s.status())) << s.status();
    EXPECT_TRUE(absl::StartsWith(s.status().message(), "--tls_key: " + o.tls_key)) << s.status();
    EXPECT_TRUE(absl::StrContains(s.status().message(), "chmod 600 " + o.tls_key)) << s.status();
    EXPECT_FALSE(absl::StrContains(s.status().message(), "\n")) << s.status();
  }
}

TEST(Security, PrivateTlsKeyWithPublicCertAndCaIsAccepted) {
  SecurityOptions o;
  o.tls_cert = WriteWithMode("cert2.pem", 0644);  // public: not checked
  o.tls_ca = WriteWithMode("ca2.pem", 0644);      // public: not checked
  for (mode_t good : {0600, 0400}) {
    o.tls_key = WriteWithMode("key2.pem", good);
    absl::StatusOr<Security> s = Security::Load(o);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_TRUE(s->tls());
  }
}

}  // namespace
}  // namespace rsslab
