// What the finder asks of Clang's AST before it resolves a knob: which
// builder methods are stages and knobs, whose method a call is, and the value
// a call's argument spells once the compiler's implicit wrapping is removed.
// Private to the rewrite library.
#pragma once

#include <clang/AST/DeclCXX.h>
#include <clang/AST/Expr.h>

#include <map>
#include <string>

namespace pipetune::rewrite::ast {

// StageBuilder's knob methods, by method name: the config key each sets.
const std::map<std::string, std::string>& KnobMethods();
// PipelineBuilder's stage methods, by method name: the op each adds ("" for
// the generic Stage(op, ...)).
const std::map<std::string, std::string>& StageMethods();

// Whether `method` belongs to the class named `qualified` ("::ns::Class").
bool IsClass(const clang::CXXMethodDecl* method, const char* qualified);

// Strips what the compiler adds around a value: implicit conversions,
// temporaries, std::string's converting constructor.
const clang::Expr* Strip(const clang::Expr* e);

// A literal a rewrite can replace in place: a number (signed or not), a
// string or a bool.
bool IsLiteral(const clang::Expr* e);

}  // namespace pipetune::rewrite::ast
