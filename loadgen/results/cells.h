// A sweep's matrix as a numbered list of cells: the unit a batch task, a pod
// or an agent runs, and the key that puts records from different machines
// back together.
//
//   std::vector<rsslab::SweepCell> cells = rsslab::ExpandCells(scenario.sweep());
//   absl::StatusOr<std::vector<int>> pick = rsslab::ParseCellSelection("3,7-9", cells.size());
//   std::string id = rsslab::MatrixId(scenario, flags);   // in every header
//
// The order is fixed and documented (docs/DEPLOY.md): repeats outermost,
// then threads in the matrix's order, then profiles in the matrix's order;
// index 0 is repeat 1, the first thread count, the first profile. So every
// repeat covers the whole matrix before the next starts, and a slow drift of
// the machine spreads over every setup instead of biasing the last ones.
#ifndef RSSLAB_LOADGEN_RESULTS_CELLS_H_
#define RSSLAB_LOADGEN_RESULTS_CELLS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/load.pb.h"
#include "proto/results.pb.h"
#include "proto/scenario.pb.h"

namespace rsslab {

struct SweepCell {
  int index = 0;  // 0-based position in the list
  std::string profile;
  int threads = 0;
  int repeat = 0;  // 1-based
  std::string id;  // "PROFILE/tTHREADS/rREPEAT", as records carry it
};

// Upper bound on a matrix's cells (profiles x threads x repeats): every
// list the loadgen builds from a matrix stays bounded.
inline constexpr int kMaxCells = 100000;

// The cell id used in records: "PROFILE/tTHREADS/rREPEAT" (repeat 1-based).
std::string CellId(const std::string& profile, int threads, int repeat);

std::vector<SweepCell> ExpandCells(const rsslab::v1::Sweep& sweep);
// The number of cells, without building the list; -1 above kMaxCells.
int CountCells(const rsslab::v1::Sweep& sweep);

// "3,7-9" -> {3, 7, 8, 9}: indices and inclusive ranges, comma-separated,
// sorted and without duplicates. INVALID_ARGUMENT naming the bad part
// (not a number, a reversed range, an index not below `total`).
absl::StatusOr<std::vector<int>> ParseCellSelection(const std::string& spec, int total);
// The inverse, compact: {3, 7, 8, 9} -> "3,7-9".
std::string FormatCellSelection(const std::vector<int>& indices);

// The matrix's identity: 16 hex digits of a 64-bit FNV-1a hash over the
// deterministic serialization of the scenario (matrix and steps; the
// description is left out) and the command line's load flags. Two runs
// with the same id ran the same cells the same way.
std::string MatrixId(const rsslab::v1::Scenario& scenario, const rsslab::v1::LoadSpec& flags);
// Why two sweep headers do not describe the same matrix, in one sentence
// naming the part that differs (profiles, threads, repeats, handler, server
// flags, steps, load flags); "" when they are the same.
std::string MatrixDifference(const rsslab::v1::Header& a, const rsslab::v1::Header& b);

// --print_cells: one line per cell ("index profile threads repeat id"),
// or a JSON document {"matrix_id":..., "cells":[{...}]}.
std::string CellsText(const std::vector<SweepCell>& cells);
std::string CellsJson(const std::vector<SweepCell>& cells, const std::string& matrix_id);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_RESULTS_CELLS_H_
