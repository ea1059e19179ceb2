// epsim validate: the simulator's predictions against a measured timeline of the same Plans
// (docs/validation.md). Each measured record is paired with its Plan by (step, micro_batch, layer),
// the Plan is simulated on the given hardware, and tasks are paired by match_tasks.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "sim/hardware/hardware_spec.hpp"
#include "sim/hardware/model_spec.hpp"
#include "sim/plan/plan.hpp"
#include "sim/validate/measured_timeline.hpp"
#include "sim/validate/task_matching.hpp"

namespace epsim {

/// Goals of the validation (docs/validation.md).
constexpr double kTaskErrorGoal = 0.05;   ///< median |error| of GEMMs and of copies
constexpr double kLayerErrorGoal = 0.10;  ///< |error| of every layer

struct RecordId {
  std::uint32_t step = 0;
  std::uint32_t micro_batch = 0;
  std::uint32_t layer = 0;
};

/// Relative error of a prediction: (predicted - measured) / measured; NaN when measured is 0.
double relative_error(double predicted, double measured);

struct TaskComparison {
  RecordId record;
  MatchedTask task;
  std::string kind;  ///< task_kind(name)
  Time_ps predicted_ps() const { return task.predicted.end_ps - task.predicted.start_ps; }
  Time_ps measured_ps() const { return task.measured.end_ps - task.measured.start_ps; }
  double error() const {
    return relative_error(static_cast<double>(predicted_ps()), static_cast<double>(measured_ps()));
  }
};

struct UnmatchedRow {
  RecordId record;
  bool predicted = true;  ///< which side has the task the other lacks
  UnmatchedTask task;
};

/// One record. Only the GPUs with at least one measured event are compared; predicted tasks on the
/// other GPUs are counted in `not_measured`. Layer time on either side is the last end minus the first
/// start of its events on matched tracks (link tracks left out) and on those GPUs.
struct LayerComparison {
  RecordId record;
  Time_ps predicted_ps = 0;
  Time_ps measured_ps = 0;
  int matched = 0;
  int predicted_only = 0;
  int measured_only = 0;
  int measured_gpus = 0;  ///< GPUs with at least one measured event
  int not_measured = 0;   ///< predicted tasks on GPUs without any measured event (not compared)
  /// Tracks with predicted tasks on the measured GPUs but not one measured event in the record (a
  /// single-GPU run has no EP kernels and no planner): the measured span lacks that work, so the layer
  /// is listed but not compared, and takes no part in the layer goal.
  std::vector<Track> unmeasured_tracks;
  bool compared() const { return unmeasured_tracks.empty(); }
  double error() const { return relative_error(static_cast<double>(predicted_ps), static_cast<double>(measured_ps)); }
};

/// Errors of one task kind on one track over all records. Statistics are over tasks whose measured
/// duration is positive (`count` of them); `zero_measured` counts the others.
struct KindStats {
  Track track = Track::compute;
  std::string kind;
  int count = 0;
  int zero_measured = 0;
  double median_abs_error = 0;
  double worst_error = 0;  ///< the signed error of largest magnitude
  Time_ps predicted_total_ps = 0;
  Time_ps measured_total_ps = 0;
};

/// The goals, each NaN when nothing of its kind was measured.
struct GoalCheck {
  double gemm_median_abs_error = 0;  ///< pooled over compute tasks whose kind starts with "gemm" or "shared expert"
  double copy_median_abs_error = 0;  ///< pooled over copy_engine tasks
  double layer_worst_abs_error = 0;
  bool met() const;
};

struct ValidationReport {
  std::string gpu_name;
  std::vector<TaskComparison> tasks;    ///< record order of the measured file, then match order
  std::vector<UnmatchedRow> unmatched;  ///< record order; per record predicted-only then measured-only
  std::vector<LayerComparison> layers;  ///< record order of the measured file
  std::vector<KindStats> kinds;         ///< by track, then kind
  GoalCheck goals;
};

/// Adds one record: `predicted` is the simulator's timeline of the record's plan.
void add_record(ValidationReport& report, const RecordId& id, const std::vector<TimelineEvent>& predicted,
                const std::vector<TimelineEvent>& measured);
/// Computes kinds and goals from tasks and layers (call once all records are in).
void finish_report(ValidationReport& report);

/// The plan for a record, or nullopt when there is none.
using PlanLookup = std::function<std::optional<Plan>(const RecordId&)>;

/// The whole comparison, record by record in the measured file's order: each record's plan is looked
/// up, simulated and compared, then dropped, so only the measured records' results are held. Throws
/// InputError (naming `measured_path` and the record) when a measured record has no plan or uses a GPU
/// the plan does not have, and (naming `plans_path`) when a plan does not fit the model or the hardware.
ValidationReport validate_measurements(const PlanLookup& find_plan, const MeasuredTimeline& measured,
                                       const HardwareSpec& hw, const ModelSpec& model, bool backward,
                                       const std::string& plans_path, const std::string& measured_path);
/// The same with plans in memory.
ValidationReport validate_measurements(const std::vector<Plan>& plans, const MeasuredTimeline& measured,
                                       const HardwareSpec& hw, const ModelSpec& model, bool backward,
                                       const std::string& plans_path, const std::string& measured_path);

/// Tokens each rank feeds into the layer, from the plan's routes: assignments / top-k.
std::vector<std::int64_t> local_tokens_of(const Plan& plan, int top_k);

void write_tasks_csv(std::ostream& out, const ValidationReport& report);
void write_layers_csv(std::ostream& out, const ValidationReport& report);
void write_unmatched_csv(std::ostream& out, const ValidationReport& report);
/// Markdown: the inputs (`header` lines, verbatim), the goal line, per-kind and per-layer tables,
/// the unmatched tasks (the first `max_unmatched_listed`, the rest in unmatched.csv).
void write_summary_md(std::ostream& out, const ValidationReport& report, const std::vector<std::string>& header,
                      std::size_t max_unmatched_listed = 40);

}  // namespace epsim
