#include "sim/sweep/yaml_text.hpp"

namespace epsim {
namespace {

void emit(YAML::Emitter& out, const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      out << YAML::BeginMap;
      for (const auto& kv : node) {
        out << YAML::Key;
        emit(out, kv.first);
        out << YAML::Value;
        emit(out, kv.second);
      }
      out << YAML::EndMap;
      break;
    case YAML::NodeType::Sequence:
      out << YAML::BeginSeq;
      for (const auto& item : node) emit(out, item);
      out << YAML::EndSeq;
      break;
    case YAML::NodeType::Scalar:
      // A plain scalar has the non-specific tag "?"; a quoted one "!".
      if (node.Tag() == "?")
        out << node.Scalar();
      else
        out << YAML::DoubleQuoted << node.Scalar();
      break;
    default:
      out << YAML::Null;
  }
}

}  // namespace

std::string yaml_document(const YAML::Node& node) {
  YAML::Emitter out;
  emit(out, node);
  return std::string(out.c_str()) + "\n";
}

std::string yaml_flow(const YAML::Node& node) {
  YAML::Emitter out;
  out.SetMapFormat(YAML::Flow);
  out.SetSeqFormat(YAML::Flow);
  emit(out, node);
  return out.c_str();
}

}  // namespace epsim
