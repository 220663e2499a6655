// The finder's questions to the AST (ast_values.h).
#include "ast_values.h"

#include <clang/AST/ExprCXX.h>

namespace pipetune::rewrite::ast {

using namespace clang;

const std::map<std::string, std::string>& KnobMethods() {
  static const std::map<std::string, std::string> m = {
      {"Parallelism", "parallelism"}, {"Buffer", "buffer"}, {"Location", "location"}, {"Random", "random"}};
  return m;
}

const std::map<std::string, std::string>& StageMethods() {
  static const std::map<std::string, std::string> m = {{"Stage", ""},
                                                       {"Range", "range"},
                                                       {"ListFiles", "list_files"},
                                                       {"ReadFile", "read_file"},
                                                       {"Map", "map"},
                                                       {"Filter", "filter"},
                                                       {"Shuffle", "shuffle"},
                                                       {"Batch", "batch"},
                                                       {"Prefetch", "prefetch"},
                                                       {"Cache", "cache"},
                                                       {"Repeat", "repeat"},
                                                       {"Take", "take"}};
  return m;
}

bool IsClass(const CXXMethodDecl* method, const char* qualified) {
  if (method == nullptr || method->getParent() == nullptr) return false;
  return "::" + method->getParent()->getQualifiedNameAsString() == qualified;
}

const Expr* Strip(const Expr* e) {
  while (e != nullptr) {
    const Expr* before = e;
    e = e->IgnoreImplicit()->IgnoreParens();
    if (const auto* construct = dyn_cast<CXXConstructExpr>(e)) {
      // Converting constructors only (std::string from a literal), never a
      // builder's own explicit one.
      const CXXConstructorDecl* ctor = construct->getConstructor();
      if (construct->getNumArgs() >= 1 && !isa<CXXTemporaryObjectExpr>(construct) && ctor != nullptr &&
          !ctor->isExplicit()) {
        bool rest_default = true;
        for (unsigned i = 1; i < construct->getNumArgs(); ++i) {
          rest_default = rest_default && isa<CXXDefaultArgExpr>(construct->getArg(i));
        }
        if (rest_default) e = construct->getArg(0);
      }
    }
    if (e == before) break;
  }
  return e;
}

bool IsLiteral(const Expr* e) {
  if (isa<IntegerLiteral, StringLiteral, CXXBoolLiteralExpr, FloatingLiteral>(e)) return true;
  if (const auto* unary = dyn_cast<UnaryOperator>(e)) {
    return (unary->getOpcode() == UO_Minus || unary->getOpcode() == UO_Plus) &&
           isa<IntegerLiteral, FloatingLiteral>(unary->getSubExpr()->IgnoreParens());
  }
  return false;
}

}  // namespace pipetune::rewrite::ast
