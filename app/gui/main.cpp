// moeplan-gui: the Qt6 desktop app. `--screenshot DIR` renders each view to PNG and exits.
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QLabel>
#include <QTemporaryDir>
#include <cstdio>

#include "app/gui/main_window.hpp"
#include "app/gui/profiling_view.hpp"
#include "app/gui/topology_view.hpp"
#include "kernels/host_memory.hpp"
#include "planner/plan_request.hpp"

namespace {

int fail(const QString& what) {
  std::fprintf(stderr, "moeplan-gui: error: %s\n", what.toLocal8Bit().constData());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  moeplan::kernels::configure_host_allocator();
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("moeplan"));
  QApplication::setApplicationName(QStringLiteral("moeplan-gui"));
  QApplication::setApplicationVersion(QStringLiteral(MOEPLAN_VERSION));
  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral("Plan MoE parallel layouts on GPU clusters"));
  parser.addHelpOption();
  parser.addVersionOption();
  const QCommandLineOption screenshot(
      QStringLiteral("screenshot"), QStringLiteral("Render every view to DIR/<view>.png and exit."),
      QStringLiteral("DIR"));
  const QCommandLineOption model(QStringLiteral("model"),
                                 QStringLiteral("Bundled model name or config.json path."),
                                 QStringLiteral("NAME|PATH"));
  const QCommandLineOption cluster(QStringLiteral("cluster"),
                                   QStringLiteral("Bundled cluster name or cluster JSON path."),
                                   QStringLiteral("NAME|PATH"));
  const QCommandLineOption load(
      QStringLiteral("load"),
      QStringLiteral("Expert-load file (.json, .csv, .npy) or synthetic spec (e.g. "
                     "powerlaw:alpha=1.2,shuffle=1)."),
      QStringLiteral("PATH|SPEC"));
  const QCommandLineOption placement(
      QStringLiteral("placement"),
      QStringLiteral("Placement policy the plan costs with: contiguous, round_robin, eplb, best."),
      QStringLiteral("POLICY"), QStringLiteral("contiguous"));
  const QCommandLineOption redundant(
      QStringLiteral("redundant"),
      QStringLiteral("Redundant expert slots for eplb and best: N per EP rank, total:R (R in "
                     "all) or auto, as moeplan plan --redundant."),
      QStringLiteral("N|total:R|auto"), QStringLiteral("0"));
  const QCommandLineOption costs(
      QStringLiteral("costs"),
      QStringLiteral("Cost database (profile DB) to plan with, as moeplan plan --costs. With "
                     "--screenshot the profiling view shows its points; without it, "
                     "--screenshot profiles this machine briefly (quick sweep, 2 ranks, "
                     "1/32 widths) and validates against that profile."),
      QStringLiteral("FILE"));
  parser.addOption(costs);
  parser.addOption(placement);
  parser.addOption(redundant);
  parser.addOption(screenshot);
  parser.addOption(model);
  parser.addOption(cluster);
  parser.addOption(load);
  parser.process(app);

  const bool shots = parser.isSet(screenshot);
  moeplan::gui::MainWindow window(nullptr, !shots);
  if (parser.isSet(model) && !window.loadModel(parser.value(model)) && shots) {
    return fail(window.errorLabel()->text());
  }
  if (parser.isSet(cluster) && !window.loadCluster(parser.value(cluster)) && shots) {
    return fail(window.topologyView()->errorLabel()->text());
  }
  if (parser.isSet(load) && !window.loadLoad(parser.value(load)) && shots) {
    return fail(window.loadErrorLabel()->text());
  }
  if (parser.isSet(placement) || parser.isSet(redundant)) {
    if (!window.setPlacement(parser.value(placement), parser.value(redundant))) {
      return fail(QStringLiteral("--placement: expected contiguous, round_robin, eplb or best; "
                                 "--redundant: expected N (0-%1 per EP rank), total:R or auto")
                      .arg(moeplan::planner::kMaxRedundantPerRank));
    }
  }
  if (parser.isSet(costs)) {
    if (!window.loadCosts(parser.value(costs)) && shots) {
      return fail(window.costErrorLabel()->text());
    }
    if (shots && !window.profilingView()->openDatabase(parser.value(costs))) {
      return fail(window.profilingView()->errorLabel()->text());
    }
  }
  if (shots) {
    window.resize(1366, 768);
    window.show();
    QTemporaryDir tmp;
    if (!parser.isSet(costs)) {
      // A real, small profile and validate, so the profiling view shows measured points.
      const QString err = window.profilingView()->runExample(
          QDir(tmp.path()).filePath(QStringLiteral("profile.db")), 2, 32, QStringLiteral("256"));
      if (!err.isEmpty()) return fail(QStringLiteral("profiling view: ") + err);
    }
    const int n = window.saveScreenshots(parser.value(screenshot));
    if (n < 0)
      return fail(QStringLiteral("cannot write screenshots to ") + parser.value(screenshot));
    std::printf("wrote %d screenshot(s) to %s\n", n,
                parser.value(screenshot).toLocal8Bit().constData());
    return 0;
  }
  window.show();
  return QApplication::exec();
}
