"""The Abseil pkg-config modules the project links: @system//:absl (shared)
and @system_static's archives for the Python extensions (static_libs.bzl)."""

ABSL_MODULES = [
    "absl_flags_parse",
    "absl_flags_usage",
    "absl_flags",
    "absl_status",
    "absl_statusor",
    "absl_synchronization",
    "absl_strings",
    "absl_str_format",
    "absl_time",
    "absl_random_random",
]
