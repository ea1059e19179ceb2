// A small linear-program builder over GLPK's simplex (Debian libglpk-dev). Balancers state their LP
// in columns (variables with bounds and a cost) and sparse rows (linear constraints with bounds),
// minimize, read the values, then may change costs or bounds and minimize again from the last basis
// (a lexicographic second objective). Deterministic: the same LP gives the same vertex every time.
#pragma once

#include <limits>
#include <utility>
#include <vector>

struct glp_prob;

namespace epsim {

class LpSolver {
 public:
  static constexpr double kInf = std::numeric_limits<double>::infinity();

  LpSolver();
  ~LpSolver();
  LpSolver(const LpSolver&) = delete;
  LpSolver& operator=(const LpSolver&) = delete;

  /// A variable lower <= x <= upper (either may be infinite) with objective coefficient `cost`;
  /// returns its index (0, 1, ...).
  int add_column(double lower, double upper, double cost);
  /// lower <= sum(coefficient * x[column]) <= upper; columns must be distinct.
  void add_row(const std::vector<std::pair<int, double>>& terms, double lower, double upper);
  void set_cost(int column, double cost);
  void set_column_bounds(int column, double lower, double upper);

  /// Runs the primal simplex (messages off): from a crash basis the first time, then from the last basis. Returns true when an optimum was found; false when the
  /// LP is infeasible or unbounded or the solver failed.
  bool minimize();
  /// The last optimum's objective and values.
  double objective() const;
  double value(int column) const;
  int num_columns() const;
  int num_rows() const;

 private:
  glp_prob* lp_;
  bool solved_once_ = false;
};

}  // namespace epsim
