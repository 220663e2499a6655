// The finder: AST matchers on the builder's stage and knob calls, and the
// resolution of each knob's value to the literal that spells it (at the call
// or at a named constant's definition) or to the reason it has none.
#include "pipetune/rewrite/finder.h"

#include <clang/AST/ASTConsumer.h>
#include <clang/AST/ASTContext.h>
#include <clang/AST/ExprCXX.h>
#include <clang/ASTMatchers/ASTMatchFinder.h>
#include <clang/ASTMatchers/ASTMatchers.h>
#include <clang/Basic/SourceManager.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/FrontendAction.h>
#include <clang/Lex/Lexer.h>
#include <clang/Tooling/CompilationDatabase.h>
#include <clang/Tooling/Tooling.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <tuple>

#include "ast_values.h"

#ifndef PIPETUNE_CLANG_RESOURCE_DIR
#error "PIPETUNE_CLANG_RESOURCE_DIR: the rewrite library's CMake sets it to Clang's resource directory"
#endif

namespace pipetune::rewrite {

std::string SourceLocation::ToString() const { return fmt::format("{}:{}:{}", file, line, column); }

namespace {

using namespace clang;
using namespace clang::ast_matchers;
using ast::IsClass;
using ast::IsLiteral;
using ast::KnobMethods;
using ast::StageMethods;
using ast::Strip;

constexpr const char* kStageClass = "::pipetune::runtime::StageBuilder";
constexpr const char* kPipelineClass = "::pipetune::runtime::PipelineBuilder";

struct Knob {
  const CXXMemberCallExpr* call = nullptr;
  std::string knob;
};

class Collector : public MatchFinder::MatchCallback {
 public:
  void run(const MatchFinder::MatchResult& result) override {
    if (const auto* call = result.Nodes.getNodeAs<CXXMemberCallExpr>("knob")) {
      knobs_.push_back({call, KnobMethods().at(call->getMethodDecl()->getNameAsString())});
    }
    if (const auto* call = result.Nodes.getNodeAs<CallExpr>("anycall")) {
      if (const FunctionDecl* f = call->getDirectCallee()) calls_[f->getCanonicalDecl()].push_back(call);
    }
  }

  std::vector<Knob> knobs_;
  std::map<const FunctionDecl*, std::vector<const CallExpr*>> calls_;
};

class Resolver {
 public:
  Resolver(ASTContext& ctx, const Collector& collected)
      : ctx_(ctx), sm_(ctx.getSourceManager()), c_(collected) {}

  SourceLocation Where(clang::SourceLocation loc) const {
    SourceLocation out;
    clang::SourceLocation spelling = sm_.getSpellingLoc(loc);
    clang::PresumedLoc p = sm_.getPresumedLoc(spelling);
    if (p.isInvalid()) return out;
    out.file = p.getFilename();
    out.line = p.getLine();
    out.column = p.getColumn();
    return out;
  }

  std::string Text(const Expr* e) const {
    CharSourceRange range = CharSourceRange::getTokenRange(e->getSourceRange());
    return Lexer::getSourceText(range, sm_, ctx_.getLangOpts()).str();
  }

  // A string value: a literal, or a constant initialized with one.
  std::optional<std::string> StringValue(const Expr* e, int depth = 0) const {
    e = Strip(e);
    if (e == nullptr || depth > 8) return std::nullopt;
    if (const auto* s = dyn_cast<StringLiteral>(e)) return s->getString().str();
    if (const auto* ref = dyn_cast<DeclRefExpr>(e)) {
      if (const auto* var = dyn_cast<VarDecl>(ref->getDecl())) {
        if (!isa<ParmVarDecl>(var) && (var->isConstexpr() || var->getType().isConstQualified()) &&
            var->getInit()) {
          return StringValue(var->getInit(), depth + 1);
        }
      }
    }
    return std::nullopt;
  }

  // The value a config would hold for the knob, if the compiler can tell.
  std::optional<std::string> Value(const Expr* e, const std::string& knob) const {
    if (e == nullptr || e->isValueDependent() || e->isTypeDependent()) return std::nullopt;
    if (knob == "location") return StringValue(e);
    if (knob == "random") {
      bool b = false;
      if (e->EvaluateAsBooleanCondition(b, ctx_)) return b ? "true" : "false";
      return std::nullopt;
    }
    Expr::EvalResult r;
    if (e->EvaluateAsInt(r, ctx_)) return std::to_string(r.Val.getInt().getExtValue());
    return std::nullopt;
  }

  // The literal spelling the value of `e`, following named constants; or why
  // there is none.
  void Locate(const Expr* arg, KnobSite& site, int depth = 0) const {
    const Expr* e = Strip(arg);
    if (isa<CXXDefaultArgExpr>(e)) {
      site.why = "the default argument (no value written at the call)";
      return;
    }
    clang::SourceLocation begin = e->getBeginLoc();
    if (begin.isMacroID()) {
      if (sm_.isMacroArgExpansion(begin)) {
        clang::SourceLocation expansion = sm_.getImmediateExpansionRange(begin).getBegin();
        std::string macro = Lexer::getImmediateMacroName(begin, sm_, ctx_.getLangOpts()).str();
        site.why = fmt::format("a macro argument: `{}` passed to macro {} at {}", Text(e), macro,
                               Where(sm_.getExpansionLoc(expansion)).ToString());
      } else {
        std::string macro = Lexer::getImmediateMacroName(begin, sm_, ctx_.getLangOpts()).str();
        site.why = fmt::format("the macro {} (expanded at {}, spelled at {})", macro,
                               Where(sm_.getExpansionLoc(begin)).ToString(), Where(begin).ToString());
      }
      return;
    }
    if (IsLiteral(e)) {
      CharSourceRange range = CharSourceRange::getTokenRange(e->getSourceRange());
      clang::SourceLocation b = sm_.getSpellingLoc(range.getBegin());
      clang::SourceLocation end =
          Lexer::getLocForEndOfToken(sm_.getSpellingLoc(range.getEnd()), 0, sm_, ctx_.getLangOpts());
      site.rewritable = true;
      site.literal = Where(b);
      site.edit_file = sm_.getFilename(b).str();
      site.offset = sm_.getFileOffset(b);
      site.length = sm_.getFileOffset(end) - site.offset;
      site.text = Text(e);
      return;
    }
    if (const auto* subst = dyn_cast<SubstNonTypeTemplateParmExpr>(e)) {
      site.why = fmt::format("the template parameter {} (its value comes from each instantiation)",
                             subst->getParameter()->getNameAsString());
      return;
    }
    if (const auto* ref = dyn_cast<DeclRefExpr>(e)) {
      const ValueDecl* decl = ref->getDecl();
      if (const auto* tp = dyn_cast<NonTypeTemplateParmDecl>(decl)) {
        site.why = fmt::format("the template parameter {} (its value comes from each instantiation)",
                               tp->getNameAsString());
        return;
      }
      if (const auto* parm = dyn_cast<ParmVarDecl>(decl)) {
        const auto* fn = dyn_cast_or_null<FunctionDecl>(parm->getDeclContext());
        site.why =
            fmt::format("the function parameter `{}` of {} (declared at {}): its value comes from each call",
                        parm->getNameAsString(), fn ? fn->getNameAsString() : std::string("a function"),
                        Where(parm->getLocation()).ToString());
        return;
      }
      if (const auto* var = dyn_cast<VarDecl>(decl)) {
        bool constant = var->isConstexpr() || var->getType().isConstQualified();
        if (constant && var->getInit() != nullptr && depth < 8) {
          KnobSite inner = site;
          Locate(var->getInit(), inner, depth + 1);
          if (inner.rewritable) {
            site = inner;
            if (site.via.empty()) site.via = var->getNameAsString();
            return;
          }
          site.why = fmt::format("the constant {} (defined at {}), whose value is {}", var->getNameAsString(),
                                 Where(var->getLocation()).ToString(), inner.why);
          return;
        }
        site.why =
            fmt::format("the variable `{}` (declared at {}): its value is known only when the program runs",
                        var->getNameAsString(), Where(var->getLocation()).ToString());
        return;
      }
      if (isa<EnumConstantDecl>(decl)) {
        site.why = fmt::format("the enumerator {} (at {})", decl->getNameAsString(),
                               Where(decl->getLocation()).ToString());
        return;
      }
    }
    site.why = fmt::format("a computed value `{}` (at {})", Text(e), Where(e->getBeginLoc()).ToString());
  }

  // The calls of the function owning `parm`, and each one's argument for it.
  std::vector<const Expr*> ArgumentsFor(const ParmVarDecl* parm) const {
    std::vector<const Expr*> out;
    const auto* fn = dyn_cast_or_null<FunctionDecl>(parm->getDeclContext());
    if (fn == nullptr) return out;
    // A template's pattern: the calls of every instantiation.
    std::vector<const FunctionDecl*> fns = {fn->getCanonicalDecl()};
    if (const FunctionTemplateDecl* t = fn->getDescribedFunctionTemplate()) {
      for (const FunctionDecl* spec : t->specializations()) fns.push_back(spec->getCanonicalDecl());
    }
    unsigned index = parm->getFunctionScopeIndex();
    for (const FunctionDecl* f : fns) {
      auto it = c_.calls_.find(f);
      if (it == c_.calls_.end()) continue;
      for (const CallExpr* call : it->second) {
        unsigned shift = isa<CXXOperatorCallExpr>(call) && isa<CXXMethodDecl>(fn) ? 1 : 0;
        if (index + shift < call->getNumArgs()) out.push_back(call->getArg(index + shift));
      }
    }
    return out;
  }

  // The call that made the stage a StageBuilder expression refers to.
  const CXXMemberCallExpr* StageCall(const Expr* e, int depth = 0) const {
    e = Strip(e);
    if (e == nullptr || depth > 16) return nullptr;
    if (const auto* call = dyn_cast<CXXMemberCallExpr>(e)) {
      const CXXMethodDecl* method = call->getMethodDecl();
      if (IsClass(method, kPipelineClass) && StageMethods().count(method->getNameAsString()) != 0)
        return call;
      if (IsClass(method, kStageClass)) return StageCall(call->getImplicitObjectArgument(), depth + 1);
    }
    // A helper returning the StageBuilder& a stage call made: follow its
    // return statement.
    if (const auto* call = dyn_cast<CallExpr>(e)) {
      const FunctionDecl* f = call->getDirectCallee();
      const FunctionDecl* def = nullptr;
      if (f != nullptr && f->hasBody(def) && def != nullptr) {
        if (const auto* body = dyn_cast_or_null<CompoundStmt>(def->getBody())) {
          for (const Stmt* st : body->body()) {
            if (const auto* ret = dyn_cast<ReturnStmt>(st)) {
              if (ret->getRetValue() != nullptr) return StageCall(ret->getRetValue(), depth + 1);
            }
          }
        }
      }
      return nullptr;
    }
    if (const auto* ref = dyn_cast<DeclRefExpr>(e)) {
      if (const auto* parm = dyn_cast<ParmVarDecl>(ref->getDecl())) {
        const CXXMemberCallExpr* found = nullptr;
        for (const Expr* arg : ArgumentsFor(parm)) {
          const CXXMemberCallExpr* s = StageCall(arg, depth + 1);
          if (s == nullptr || (found != nullptr && found != s)) return nullptr;
          found = s;
        }
        return found;
      }
      if (const auto* var = dyn_cast<VarDecl>(ref->getDecl())) {
        if (var->getInit() != nullptr) return StageCall(var->getInit(), depth + 1);
      }
    }
    return nullptr;
  }

  // The declaration (or construction) identifying the pipeline a
  // PipelineBuilder expression refers to, and its name. `outer` gets the
  // offsets of the helper calls passed through, innermost first.
  const void* PipelineOf(const Expr* e, std::string* name, SourceLocation* where, int depth = 0,
                         std::vector<unsigned>* outer = nullptr) const {
    e = Strip(e);
    if (e == nullptr || depth > 16) return nullptr;
    if (const auto* call = dyn_cast<CXXMemberCallExpr>(e)) {
      if (IsClass(call->getMethodDecl(), kPipelineClass)) {
        return PipelineOf(call->getImplicitObjectArgument(), name, where, depth + 1, outer);
      }
      return nullptr;
    }
    if (const auto* construct = dyn_cast<CXXConstructExpr>(e)) {
      if (construct->getNumArgs() >= 1) {
        if (auto n = StringValue(construct->getArg(0))) *name = *n;
      }
      *where = Where(construct->getBeginLoc());
      return construct;
    }
    if (const auto* ref = dyn_cast<DeclRefExpr>(e)) {
      if (const auto* parm = dyn_cast<ParmVarDecl>(ref->getDecl())) {
        const void* found = nullptr;
        std::vector<unsigned> first_outer;
        for (const Expr* arg : ArgumentsFor(parm)) {
          std::string n;
          SourceLocation w;
          std::vector<unsigned> sub;
          const void* p = PipelineOf(arg, &n, &w, depth + 1, &sub);
          if (p == nullptr || (found != nullptr && found != p)) return nullptr;
          if (found == nullptr) {
            first_outer.push_back(sm_.getFileOffset(sm_.getExpansionLoc(arg->getBeginLoc())));
            first_outer.insert(first_outer.end(), sub.begin(), sub.end());
          }
          found = p;
          *name = n;
          *where = w;
        }
        if (outer != nullptr) *outer = first_outer;
        return found;
      }
      if (const auto* var = dyn_cast<VarDecl>(ref->getDecl())) {
        const Expr* init = var->getInit() ? var->getInit()->IgnoreImplicit() : nullptr;
        if (const auto* construct = dyn_cast_or_null<CXXConstructExpr>(init)) {
          if (construct->getNumArgs() >= 1) {
            if (auto n = StringValue(construct->getArg(0))) *name = *n;
          }
          *where = Where(var->getLocation());
          return var;
        }
        if (init != nullptr && var->getType()->isReferenceType()) {
          return PipelineOf(init, name, where, depth + 1, outer);
        }
        // A builder made some other way (returned by a function): the
        // variable still identifies it.
        *where = Where(var->getLocation());
        return var;
      }
    }
    return nullptr;
  }

  FoundStage Stage(const CXXMemberCallExpr* call) const {
    FoundStage stage;
    const CXXMethodDecl* method = call->getMethodDecl();
    const std::string method_name = method->getNameAsString();
    if (call->getNumArgs() >= 1) stage.name = StringValue(call->getArg(0)).value_or("");
    stage.op = StageMethods().at(method_name);
    if (method_name == "Stage" && call->getNumArgs() >= 2)
      stage.op = StringValue(call->getArg(1)).value_or("?");
    if (method_name == "Map" || method_name == "Filter") {
      if (method->getNumParams() == 3) {
        stage.fn = StringValue(call->getArg(1)).value_or("");
      } else if (method->getNumParams() == 2) {
        std::string type = method->getParamDecl(1)->getType().getAsString();
        bool callable =
            type.find("Callable") != std::string::npos || type.find("function") != std::string::npos;
        stage.fn = callable ? stage.name : StringValue(call->getArg(1)).value_or("");
      }
    }
    stage.where = Where(call->getExprLoc());
    clang::SourceLocation end = call->getEndLoc();
    if (!end.isMacroID()) {
      clang::SourceLocation after = Lexer::getLocForEndOfToken(end, 0, sm_, ctx_.getLangOpts());
      stage.can_insert = after.isValid();
      stage.insert_file = sm_.getFilename(after).str();
      stage.insert_offset = sm_.getFileOffset(after);
    }
    return stage;
  }

  FindResult Run() {
    FindResult result;
    std::map<const void*, size_t> pipelines;  // identity -> index in result
    std::map<const CXXMemberCallExpr*, std::pair<size_t, std::string>>
        stage_of;                                            // stage call -> (pipeline, stage)
    std::set<std::pair<unsigned, std::string>> stages_seen;  // (location, pipeline key) of stage calls
    std::map<std::string, size_t> site_index;                // call location + pipeline -> knob index
    // (pipeline, stage) -> the helper calls leading to it, outermost first,
    // then the stage call: the order the program makes its stages in.
    std::map<std::pair<size_t, std::string>, std::vector<unsigned>> order;
    std::vector<unsigned> last_outer;
    auto pipeline_index = [&](const CXXMemberCallExpr* stage_call) -> std::optional<size_t> {
      std::string name;
      SourceLocation where;
      last_outer.clear();
      const void* id = PipelineOf(stage_call->getImplicitObjectArgument(), &name, &where, 0, &last_outer);
      if (id == nullptr) return std::nullopt;
      auto [it, inserted] = pipelines.emplace(id, result.pipelines.size());
      if (inserted) {
        FoundPipeline p;
        p.name = name;
        p.where = where;
        result.pipelines.push_back(std::move(p));
      }
      return it->second;
    };
    auto add_stage =
        [&](const CXXMemberCallExpr* stage_call) -> std::optional<std::pair<size_t, std::string>> {
      auto found = stage_of.find(stage_call);
      if (found != stage_of.end()) return found->second;
      std::optional<size_t> p = pipeline_index(stage_call);
      if (!p) {
        result.warnings.push_back(fmt::format("{}: a stage of a pipeline this finder cannot follow",
                                              Where(stage_call->getExprLoc()).ToString()));
        return std::nullopt;
      }
      FoundStage stage = Stage(stage_call);
      if (stage.name.empty()) {
        result.warnings.push_back(
            fmt::format("{}: a stage whose name is not a literal or a constant", stage.where.ToString()));
        return std::nullopt;
      }
      auto key = std::make_pair(sm_.getExpansionLoc(stage_call->getExprLoc()).getRawEncoding(),
                                fmt::format("{}", *p));
      if (stages_seen.insert(key).second) {
        std::vector<unsigned> k(last_outer.rbegin(), last_outer.rend());
        k.push_back(sm_.getFileOffset(sm_.getExpansionLoc(stage_call->getExprLoc())));
        order.emplace(std::make_pair(*p, stage.name), std::move(k));
        result.pipelines[*p].stages.push_back(stage);
      }
      stage_of[stage_call] = {*p, stage.name};
      return stage_of[stage_call];
    };
    // Every stage call, so a stage with no knob call is listed too.
    for (const CXXMemberCallExpr* call : stage_calls_) add_stage(call);
    for (const Knob& k : c_.knobs_) {
      const CXXMemberCallExpr* stage_call = StageCall(k.call->getImplicitObjectArgument());
      if (stage_call == nullptr) {
        result.warnings.push_back(fmt::format("{}: a {} knob on a stage this finder cannot follow",
                                              Where(k.call->getExprLoc()).ToString(), k.knob));
        continue;
      }
      auto stage = add_stage(stage_call);
      if (!stage) continue;
      KnobSite site;
      site.pipeline = result.pipelines[stage->first].name;
      site.stage = stage->second;
      site.knob = k.knob;
      site.call = Where(k.call->getExprLoc());
      const Expr* arg = k.call->getNumArgs() >= 1 ? k.call->getArg(0) : nullptr;
      if (arg == nullptr) continue;
      site.value = Value(arg, k.knob);
      Locate(arg, site);
      std::string key = fmt::format("{}|{}|{}", sm_.getExpansionLoc(k.call->getExprLoc()).getRawEncoding(),
                                    stage->first, site.stage);
      auto [it, inserted] = site_index.emplace(key, result.pipelines[stage->first].knobs.size());
      std::vector<KnobSite>& knobs = result.pipelines[stage->first].knobs;
      if (inserted) {
        knobs.push_back(site);
        continue;
      }
      // The same call seen again: a template's pattern and its
      // instantiations. It is rewritable only if every one agrees.
      KnobSite& seen = knobs[it->second];
      if (!seen.value) seen.value = site.value;
      if (seen.rewritable && (!site.rewritable || site.offset != seen.offset)) {
        seen.rewritable = false;
        seen.why = site.why.empty() ? "a value that differs between template instantiations" : site.why;
      }
      if (seen.value && site.value && *seen.value != *site.value) {
        seen.value = std::nullopt;
        seen.rewritable = false;
        if (seen.why.empty()) seen.why = "a value that differs between template instantiations";
      }
    }
    // Stages in the order the program makes them; knobs in source order (the
    // matcher meets an outer call of a chain first).
    for (size_t i = 0; i < result.pipelines.size(); ++i) {
      std::vector<FoundStage>& stages = result.pipelines[i].stages;
      std::stable_sort(stages.begin(), stages.end(), [&](const FoundStage& a, const FoundStage& b) {
        return order[{i, a.name}] < order[{i, b.name}];
      });
    }
    for (FoundPipeline& p : result.pipelines) {
      std::stable_sort(p.knobs.begin(), p.knobs.end(), [](const KnobSite& a, const KnobSite& b) {
        return std::tie(a.call.file, a.call.line, a.call.column) <
               std::tie(b.call.file, b.call.line, b.call.column);
      });
    }
    return result;
  }

  std::vector<const CXXMemberCallExpr*> stage_calls_;

 private:
  ASTContext& ctx_;
  const SourceManager& sm_;
  const Collector& c_;
};

class StageCollector : public MatchFinder::MatchCallback {
 public:
  void run(const MatchFinder::MatchResult& result) override {
    if (const auto* call = result.Nodes.getNodeAs<CXXMemberCallExpr>("stage")) calls_.push_back(call);
  }
  std::vector<const CXXMemberCallExpr*> calls_;
};

class Consumer : public ASTConsumer {
 public:
  Consumer(FindResult* out, bool* had_errors, CompilerInstance& ci)
      : out_(out), had_errors_(had_errors), ci_(ci) {}

  void HandleTranslationUnit(ASTContext& ctx) override {
    if (ci_.getDiagnostics().hasErrorOccurred()) {
      *had_errors_ = true;
      return;
    }
    MatchFinder finder;
    Collector collector;
    StageCollector stages;
    auto knob_method = cxxMethodDecl(hasAnyName("Parallelism", "Buffer", "Location", "Random"),
                                     ofClass(cxxRecordDecl(hasName(kStageClass))));
    finder.addMatcher(cxxMemberCallExpr(callee(knob_method)).bind("knob"), &collector);
    auto stage_method = cxxMethodDecl(hasAnyName("Stage", "Range", "ListFiles", "ReadFile", "Map", "Filter",
                                                 "Shuffle", "Batch", "Prefetch", "Cache", "Repeat", "Take"),
                                      ofClass(cxxRecordDecl(hasName(kPipelineClass))));
    finder.addMatcher(cxxMemberCallExpr(callee(stage_method)).bind("stage"), &stages);
    // Calls of the program's own functions: a builder passed to a helper is
    // followed back to the calls of that helper.
    finder.addMatcher(callExpr(unless(isExpansionInSystemHeader()), callee(functionDecl())).bind("anycall"),
                      &collector);
    finder.matchAST(ctx);
    Resolver resolver(ctx, collector);
    resolver.stage_calls_ = stages.calls_;
    *out_ = resolver.Run();
  }

 private:
  FindResult* out_;
  bool* had_errors_;
  CompilerInstance& ci_;
};

class Action : public ASTFrontendAction {
 public:
  Action(FindResult* out, bool* had_errors) : out_(out), had_errors_(had_errors) {}
  std::unique_ptr<ASTConsumer> CreateASTConsumer(CompilerInstance& ci, llvm::StringRef) override {
    return std::make_unique<Consumer>(out_, had_errors_, ci);
  }

 private:
  FindResult* out_;
  bool* had_errors_;
};

class Factory : public tooling::FrontendActionFactory {
 public:
  Factory(FindResult* out, bool* had_errors) : out_(out), had_errors_(had_errors) {}
  std::unique_ptr<FrontendAction> create() override { return std::make_unique<Action>(out_, had_errors_); }

 private:
  FindResult* out_;
  bool* had_errors_;
};

std::vector<std::string> ExtraArgs() {
  return {"-resource-dir=" PIPETUNE_CLANG_RESOURCE_DIR, "-Wno-unknown-warning-option", "-Wno-error",
          "-fsyntax-only"};
}

}  // namespace

StatusOr<FindResult> FindInCode(const std::string& code, const std::string& file_name,
                                const std::vector<std::string>& args,
                                const std::vector<std::pair<std::string, std::string>>& headers) {
  FindResult result;
  bool had_errors = false;
  std::vector<std::string> all = args;
  for (const std::string& a : ExtraArgs()) all.push_back(a);
  tooling::FileContentMappings mapped(headers.begin(), headers.end());
  bool ok =
      tooling::runToolOnCodeWithArgs(std::make_unique<Action>(&result, &had_errors), code, all, file_name,
                                     "pipetune-rewrite", std::make_shared<PCHContainerOperations>(), mapped);
  if (!ok || had_errors) return InvalidInput(file_name + ": does not compile (Clang's errors are above)");
  return result;
}

StatusOr<FindResult> FindInFile(const std::string& path, const CompileSetup& setup) {
  std::string error;
  std::unique_ptr<tooling::CompilationDatabase> db;
  if (!setup.build_dir.empty()) {
    db = tooling::CompilationDatabase::loadFromDirectory(setup.build_dir, error);
    if (!db) return InvalidInput(fmt::format("-p {}: {}", setup.build_dir, error));
    // A file the build does not list (a copy of a source) borrows the flags
    // of the nearest one that it does.
    db = tooling::inferMissingCompileCommands(std::move(db));
  } else if (setup.has_flags) {
    db = std::make_unique<tooling::FixedCompilationDatabase>(".", setup.flags);
  } else {
    db = tooling::CompilationDatabase::autoDetectFromSource(path, error);
    if (db) {
      db = tooling::inferMissingCompileCommands(std::move(db));
    } else {
      db = std::make_unique<tooling::FixedCompilationDatabase>(".", std::vector<std::string>{"-std=c++20"});
    }
  }
  tooling::ClangTool tool(*db, {path});
  tool.appendArgumentsAdjuster(
      tooling::getInsertArgumentAdjuster(ExtraArgs(), tooling::ArgumentInsertPosition::END));
  FindResult result;
  bool had_errors = false;
  Factory factory(&result, &had_errors);
  int rc = tool.run(&factory);
  if (rc != 0 || had_errors) {
    return InvalidInput(path +
                        ": does not compile (Clang's errors are above; give the build's flags with "
                        "-p BUILD_DIR or -- FLAGS)");
  }
  return result;
}

}  // namespace pipetune::rewrite
