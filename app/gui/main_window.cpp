// The moeplan-gui main window.
#include "app/gui/main_window.hpp"

#include <QAction>
#include <QCloseEvent>
#include <QComboBox>
#include <QCoreApplication>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QGuiApplication>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QKeySequence>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QScreen>
#include <QSettings>
#include <QSpinBox>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableWidget>
#include <QVBoxLayout>

#include "app/gui/export_dialog.hpp"
#include "app/gui/layouts_view.hpp"
#include "app/gui/load_view.hpp"
#include "app/gui/profiling_view.hpp"
#include "app/gui/serving_view.hpp"
#include "app/gui/session.hpp"
#include "app/gui/topology_view.hpp"
#include "kernels/backends.hpp"
#include "models/model_summary.hpp"
#include "models/registry.hpp"
#include "models/weight_format.hpp"
#include "planner/costs/roofline_costs.hpp"
#include "planner/plan_request.hpp"

namespace moeplan::gui {

MainWindow::MainWindow(QWidget* parent, bool useSettings)
    : QMainWindow(parent), useSettings_(useSettings) {
  setWindowTitle(QStringLiteral("moeplan %1").arg(QStringLiteral(MOEPLAN_VERSION)));
  session_ = new Session(this);
  tabs_ = new QTabWidget(this);
  auto add = [this](QWidget* page, const QString& name, const QString& title) {
    page->setObjectName(name);
    tabs_->addTab(page, title);
  };
  add(buildModelView(), QStringLiteral("model"), tr("&Model && workload"));
  topology_ = new TopologyView(session_, tabs_);
  add(topology_, QStringLiteral("topology"), tr("&Topology"));
  connect(topology_, &TopologyView::clusterOpened, this, [this](const QString& nameOrPath) {
    if (useSettings_) QSettings().setValue(QStringLiteral("lastCluster"), nameOrPath);
  });
  connect(topology_, &TopologyView::saved, this,
          [this](const QString& message) { statusBar()->showMessage(message); });
  layouts_ = new LayoutsView(session_, tabs_);
  add(layouts_, QStringLiteral("layouts"), tr("&Layouts"));
  connect(layouts_, &LayoutsView::saved, this,
          [this](const QString& message) { statusBar()->showMessage(message); });
  loadView_ = new LoadView(session_, tabs_);
  add(loadView_, QStringLiteral("load_balance"), tr("Load &balance"));
  traffic_ = new TrafficView(session_, tabs_);
  add(traffic_, QStringLiteral("traffic"), tr("T&raffic"));
  profiling_ = new ProfilingView(session_, tabs_);
  add(profiling_, QStringLiteral("profiling"), tr("&Profiling"));
  serving_ = new ServingView(session_, tabs_);
  add(serving_, QStringLiteral("serving"), tr("&Serving"));
  setCentralWidget(tabs_);

  auto* file = menuBar()->addMenu(tr("&File"));
  file->addAction(tr("&Open config.json…"), QKeySequence::Open, this, &MainWindow::onOpenConfig);
  file->addAction(tr("Open expert &load…"), this, &MainWindow::onOpenLoad);
  file->addAction(tr("Open &cost DB…"), this, &MainWindow::onOpenCosts);
  file->addAction(tr("&Export layout…"), this, &MainWindow::onExport);
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);
  auto* view = menuBar()->addMenu(tr("&View"));
  for (int i = 0; i < tabs_->count(); ++i) {
    // The tab's text without its mnemonic: "&&" is a literal "&", a lone "&" marks the letter.
    QString name = tabs_->tabText(i);
    name.replace(QStringLiteral("&&"), QStringLiteral("\x01")).remove(QLatin1Char('&'));
    name.replace(QLatin1Char('\x01'), QStringLiteral("&&"));
    view->addAction(name, QKeySequence(Qt::ALT | static_cast<Qt::Key>(Qt::Key_1 + i)), this,
                    [this, i] { tabs_->setCurrentIndex(i); });
  }
  view->addSeparator();
  view->addAction(tr("&Plan again"), QKeySequence(Qt::Key_F5), session_, &Session::replan);
  auto* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("&Backends…"), this, &MainWindow::onShowBackends);

  progress_ = new QProgressBar(this);
  progress_->setRange(0, 0);
  progress_->setMaximumWidth(160);
  progress_->hide();
  cancel_ = new QPushButton(tr("Cancel"), this);
  cancel_->setShortcut(QKeySequence(Qt::Key_Escape));
  cancel_->setToolTip(tr("Abandon the running plan (Esc)"));
  cancel_->hide();
  statusBar()->addPermanentWidget(progress_);
  statusBar()->addPermanentWidget(cancel_);
  connect(cancel_, &QPushButton::clicked, session_, &Session::cancel);
  connect(session_, &Session::planStarted, this, [this] {
    progress_->show();
    cancel_->show();
    statusBar()->showMessage(tr("Planning…"));
  });
  connect(session_, &Session::planFinished, this, [this] {
    progress_->hide();
    cancel_->hide();
    const auto plan = session_->plan();
    statusBar()->showMessage(plan ? tr("Planned %1 layouts (%2)")
                                        .arg(plan->layouts.size())
                                        .arg(QString::fromStdString(plan->cost_source))
                                  : session_->planError());
    showCostSource();
  });
  connect(session_, &Session::planCancelled, this, [this] {
    progress_->hide();
    cancel_->hide();
    statusBar()->showMessage(tr("Planning cancelled; the views keep the previous plan."));
  });
  connect(session_, &Session::loadChanged, this, [this] {
    const auto& l = session_->load();
    loadSummary_->setText(
        l ? tr("Load: %1 (%2), %3 layers × %4 experts")
                .arg(QString::fromStdString(l->load.source), QString::fromStdString(l->format))
                .arg(l->load.num_layers())
                .arg(l->load.num_experts)
          : tr("Load: none"));
  });

  resize(1280, 720);
  QString model = QString::fromLatin1(models::kDefaultModel);
  QString cluster = QString::fromLatin1(planner::kDefaultCluster);
  QString load = QStringLiteral("uniform");
  QString costs;
  if (useSettings_) {
    QSettings s;
    restoreGeometry(s.value(QStringLiteral("geometry")).toByteArray());
    restoreState(s.value(QStringLiteral("windowState")).toByteArray());
    model = s.value(QStringLiteral("lastModel"), model).toString();
    cluster = s.value(QStringLiteral("lastCluster"), cluster).toString();
    load = s.value(QStringLiteral("lastLoad"), load).toString();
    costs = s.value(QStringLiteral("lastCosts")).toString();
  }
  if (!loadModel(model)) loadModel(QString::fromLatin1(models::kDefaultModel));
  if (!loadCluster(cluster)) loadCluster(QString::fromLatin1(planner::kDefaultCluster));
  if (!loadLoad(load)) loadLoad(QStringLiteral("uniform"));
  // A cost DB that no longer loads (moved, or not for this cluster) says so in the model view.
  if (!costs.isEmpty()) loadCosts(costs);
  if (useSettings_) {
    // The plan choices of the last session (each read before any is applied: applying the
    // phase resets the tokens to the phase's default).
    QSettings s;
    const QString phase = s.value(QStringLiteral("phase"), phase_->currentText()).toString();
    const bool decode = phase == QStringLiteral("decode");
    const int tokens =
        s.value(QStringLiteral("tokens"),
                decode ? planner::kDefaultDecodeBatchPerGpu : planner::kDefaultPrefillTokensPerGpu)
            .toInt();
    const QString policy = s.value(QStringLiteral("placement"), policy_->currentText()).toString();
    const int redundant = s.value(QStringLiteral("redundant"), 0).toInt();
    const int redundantKind = s.value(QStringLiteral("redundantKind"), 0).toInt();
    const int isl = s.value(QStringLiteral("isl"), 0).toInt();
    const int osl = s.value(QStringLiteral("osl"), 0).toInt();
    const double fraction =
        s.value(QStringLiteral("memFraction"), planner::kDefaultMemFraction).toDouble();
    const double target = s.value(QStringLiteral("latencyTarget"), 0.0).toDouble();
    restoring_ = true;
    if (isl >= isl_->minimum() && isl <= isl_->maximum()) isl_->setValue(isl);
    if (osl >= osl_->minimum() && osl <= osl_->maximum()) osl_->setValue(osl);
    if (fraction >= memFraction_->minimum() && fraction <= memFraction_->maximum()) {
      memFraction_->setValue(fraction);
    }
    if (target >= target_->minimum() && target <= target_->maximum()) target_->setValue(target);
    phase_->setCurrentIndex(decode ? 1 : 0);
    if (tokens >= tokens_->minimum() && tokens <= tokens_->maximum()) tokens_->setValue(tokens);
    if (policy_->findText(policy) >= 0) policy_->setCurrentIndex(policy_->findText(policy));
    if (redundantKind >= 0 && redundantKind < redundantKind_->count()) {
      redundantKind_->setCurrentIndex(redundantKind);  // sets the count's range first
    }
    if (redundant >= 0 && redundant <= redundant_->maximum()) redundant_->setValue(redundant);
    restoring_ = false;
    onWorkloadEdited();
    fitToScreen();
  }
}

void MainWindow::fitToScreen() {
  // A geometry saved on a larger screen: shrink and move the window so that its frame (title
  // bar and borders included) lies inside the screen's available area.
  QScreen* screen = this->screen() != nullptr ? this->screen() : QGuiApplication::primaryScreen();
  if (screen == nullptr || isMaximized() || isFullScreen()) return;
  const QRect avail = screen->availableGeometry();
  QMargins frame(
      frameGeometry().left() - geometry().left(), geometry().top() - frameGeometry().top(),
      frameGeometry().right() - geometry().right(), frameGeometry().bottom() - geometry().bottom());
  // Before the window manager frames the window its margins are unknown: assume a title bar.
  if (frame.isNull()) frame = QMargins(4, 32, 4, 4);
  const QSize room(avail.width() - frame.left() - frame.right(),
                   avail.height() - frame.top() - frame.bottom());
  const QSize size = this->size().boundedTo(room).expandedTo(minimumSize());
  if (size != this->size()) resize(size);
  QRect g(geometry().topLeft(), size);
  const QRect fg = g.marginsAdded(frame);
  QPoint shift(0, 0);
  if (fg.right() > avail.right()) shift.rx() = avail.right() - fg.right();
  if (fg.bottom() > avail.bottom()) shift.ry() = avail.bottom() - fg.bottom();
  if (fg.left() + shift.x() < avail.left()) shift.rx() = avail.left() - fg.left();
  if (fg.top() + shift.y() < avail.top()) shift.ry() = avail.top() - fg.top();
  if (!shift.isNull()) move(pos() + shift);
}

void MainWindow::showEvent(QShowEvent* event) {
  QMainWindow::showEvent(event);
  // Once shown the frame is known: check again.
  if (useSettings_ && !shownOnce_) {
    shownOnce_ = true;
    fitToScreen();
  }
}

QWidget* MainWindow::buildModelView() {
  auto* page = new QWidget(this);
  auto* outer = new QHBoxLayout(page);
  auto* left = new QVBoxLayout();
  auto* row = new QHBoxLayout();
  auto* modelLabel = new QLabel(tr("M&odel:"), page);
  row->addWidget(modelLabel);
  modelCombo_ = new QComboBox(page);
  modelLabel->setBuddy(modelCombo_);
  for (const auto& name : models::bundled_model_names()) {
    modelCombo_->addItem(QString::fromStdString(name));
  }
  row->addWidget(modelCombo_, 1);
  auto* open = new QPushButton(tr("Open confi&g.json…"), page);
  row->addWidget(open);
  left->addLayout(row);

  errorLabel_ = new QLabel(page);
  errorLabel_->setStyleSheet(QStringLiteral("color: #b00020;"));
  errorLabel_->setWordWrap(true);
  errorLabel_->hide();
  left->addWidget(errorLabel_);

  modelTable_ = new QTableWidget(0, 2, page);
  modelTable_->setHorizontalHeaderLabels({tr("Figure"), tr("Value")});
  modelTable_->horizontalHeader()->setStretchLastSection(true);
  modelTable_->verticalHeader()->hide();
  modelTable_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  left->addWidget(modelTable_, 1);
  outer->addLayout(left, 3);

  auto* box = new QGroupBox(tr("Workload"), page);
  auto* form = new QFormLayout(box);
  phase_ = new QComboBox(box);
  phase_->addItems({QStringLiteral("prefill"), QStringLiteral("decode")});
  tokens_ = new QSpinBox(box);
  tokens_->setRange(1, 1 << 20);
  tokens_->setValue(planner::kDefaultPrefillTokensPerGpu);
  tokens_->setSuffix(tr(" tokens/GPU"));
  tokens_->setKeyboardTracking(false);
  weights_ = new QComboBox(box);
  weights_->addItem(tr("model's own"), QString());
  for (const auto& name : weight_format_names()) {
    weights_->addItem(QString::fromStdString(name), QString::fromStdString(name));
  }
  weights_->setToolTip(
      tr("Weight format of the plan (as moeplan plan --weights): the model's own, read from its "
         "quantization_config or torch_dtype, or a what-if format. Memory, expert GEMMs and the "
         "dispatch payload follow it."));
  form->addRow(tr("Weight dt&ype:"), weights_);
  form->addRow(tr("Ph&ase:"), phase_);
  form->addRow(tr("To&kens per GPU:"), tokens_);
  target_ = new QDoubleSpinBox(box);
  target_->setRange(0.0, 1e6);
  target_->setDecimals(1);
  target_->setSingleStep(5.0);
  target_->setSpecialValueText(tr("no target"));
  target_->setSuffix(tr(" ms"));
  target_->setKeyboardTracking(false);
  target_->setToolTip(
      tr("Latency target of the phase (moeplan plan --ttft-ms in prefill, --tpot-ms in "
         "decode): layouts whose step takes longer do not meet it and are not recommended. "
         "0: no target."));
  form->addRow(tr("Late&ncy target:"), target_);
  // The context, one row: input and output tokens per sequence and the memory fraction.
  isl_ = new QSpinBox(box);
  isl_->setRange(0, 1 << 24);
  isl_->setSpecialValueText(tr("no KV cache"));
  isl_->setSuffix(tr(" in"));
  isl_->setKeyboardTracking(false);
  isl_->setToolTip(
      tr("Input tokens per sequence (moeplan plan --isl): counts each layout's KV "
         "cache (decode: the batch's sequences of input + output tokens; prefill: "
         "the step's prompts). 0: the KV cache is not counted."));
  osl_ = new QSpinBox(box);
  osl_->setRange(0, 1 << 24);
  osl_->setSuffix(tr(" out"));
  osl_->setKeyboardTracking(false);
  osl_->setToolTip(tr("Output tokens per sequence (moeplan plan --osl; decode needs them)"));
  memFraction_ = new QDoubleSpinBox(box);
  memFraction_->setRange(0.05, 1.0);
  memFraction_->setSingleStep(0.01);
  memFraction_->setDecimals(2);
  memFraction_->setValue(planner::kDefaultMemFraction);
  memFraction_->setKeyboardTracking(false);
  memFraction_->setToolTip(
      tr("With a context: share of each GPU's memory for weights, activations and KV cache "
         "(moeplan plan --mem-fraction; default 0.9, vLLM's gpu_memory_utilization)"));
  auto* contextRow = new QHBoxLayout;
  contextRow->addWidget(isl_, 1);
  contextRow->addWidget(osl_, 1);
  contextRow->addWidget(memFraction_);
  auto* contextLabel = new QLabel(tr("Conte&xt:"), box);
  contextLabel->setBuddy(isl_);
  form->addRow(contextLabel, contextRow);
  auto* loadRow = new QHBoxLayout();
  loadSpec_ = new QLineEdit(QStringLiteral("uniform"), box);
  loadSpec_->setToolTip(
      tr("A load file (.json, .csv, .npy) or a synthetic spec: uniform, powerlaw:alpha=1.2, "
         "hot:n=4,share=0.5 (keys: shuffle=1, layers=, tokens=, seed=). Enter applies."));
  loadRow->addWidget(loadSpec_, 1);
  auto* openLoad = new QPushButton(tr("Bro&wse…"), box);
  loadRow->addWidget(openLoad);
  auto* loadLabel = new QLabel(tr("Expert loa&d:"), box);
  loadLabel->setBuddy(loadSpec_);
  form->addRow(loadLabel, loadRow);
  loadError_ = new QLabel(box);
  loadError_->setStyleSheet(QStringLiteral("color: #b00020;"));
  loadError_->setWordWrap(true);
  loadError_->hide();
  form->addRow(loadError_);
  loadSummary_ = new QLabel(box);
  loadSummary_->setWordWrap(true);
  form->addRow(loadSummary_);
  policy_ = new QComboBox(box);
  policy_->addItems({QStringLiteral("contiguous"), QStringLiteral("round_robin"),
                     QStringLiteral("eplb"), QStringLiteral("best")});
  policy_->setToolTip(tr("Expert placement the plan costs each EP size with"));
  form->addRow(tr("Pla&cement:"), policy_);
  redundant_ = new QSpinBox(box);
  redundant_->setRange(0, planner::kMaxRedundantPerRank);
  redundant_->setToolTip(tr("Redundant expert slots (replicas of hot experts) for eplb and best"));
  redundantKind_ = new QComboBox(box);
  redundantKind_->addItems({tr("per EP rank"), tr("in all"), tr("auto")});
  redundantKind_->setToolTip(
      tr("Per EP rank: every EP size with experts % ep == 0 gets N per rank. In all: R slots at "
         "every EP size, legal when (experts + R) % ep == 0 (DeepSeek-V3 on 144 GPUs: 256 + 32). "
         "Auto: per EP size the fewest that make it legal (as moeplan plan --redundant)."));
  auto* redundantRow = new QHBoxLayout;
  redundantRow->addWidget(redundant_);
  redundantRow->addWidget(redundantKind_);
  auto* redundantLabel = new QLabel(tr("Red&undant slots:"), box);
  redundantLabel->setBuddy(redundant_);
  form->addRow(redundantLabel, redundantRow);
  costSource_ = new QComboBox(box);
  costSource_->addItem(tr("roofline (device spec + topology; calibrated where fitted)"));
  costSource_->addItem(tr("profile DB (measured; as moeplan plan --costs)"));
  costSource_->setToolTip(
      tr("Roofline: figures from the device spec and topology — for H100, H200 and HGX B200 "
         "calibrated against measured GPU kernel and NCCL tables (roofline-calibrated; "
         "docs/GPU_COSTS.md), for other devices uncalibrated. Profile DB: measured costs from a "
         "database written by `moeplan profile` or the Profiling view, as `moeplan plan --costs "
         "FILE` uses them (queries it lacks fall back to the roofline and say so)."));
  // The DB button beside the source; the line saying what the source is gets a row of its own,
  // where the form gives a wrapped label the height of all its lines (beside the button it kept
  // one line's height and cut the rest off).
  auto* costRow = new QHBoxLayout();
  costRow->addWidget(costSource_, 1);
  auto* openCosts = new QPushButton(tr("DB f&ile…"), box);
  openCosts->setToolTip(tr("Choose the cost database (a profile DB)"));
  costRow->addWidget(openCosts);
  auto* costLabel = new QLabel(tr("Cost sourc&e:"), box);
  costLabel->setBuddy(costSource_);
  form->addRow(costLabel, costRow);
  costFile_ = new QLabel(box);
  costFile_->setWordWrap(true);
  form->addRow(costFile_);
  costError_ = new QLabel(box);
  costError_->setStyleSheet(QStringLiteral("color: #b00020;"));
  costError_->setWordWrap(true);
  costError_->hide();
  form->addRow(costError_);
  auto* note = new QLabel(tr("Every change plans again in the background (F5 forces it; Esc "
                             "cancels). Results are in the Layouts, Load balance and Traffic "
                             "views."),
                          box);
  note->setWordWrap(true);
  form->addRow(note);
  outer->addWidget(box, 2);

  connect(modelCombo_, &QComboBox::activated, this, &MainWindow::onModelChosen);
  connect(open, &QPushButton::clicked, this, &MainWindow::onOpenConfig);
  connect(openLoad, &QPushButton::clicked, this, &MainWindow::onOpenLoad);
  connect(openCosts, &QPushButton::clicked, this, &MainWindow::onOpenCosts);
  connect(costSource_, &QComboBox::activated, this, [this](int i) {
    if (i == 0) {
      loadCosts(QString());
    } else if (session_->costDb().isEmpty()) {
      onOpenCosts();
    }
    showCostSource();
  });
  connect(session_, &Session::costSourceChanged, this, [this] {
    costError_->hide();
    showCostSource();
    if (useSettings_) QSettings().setValue(QStringLiteral("lastCosts"), session_->costDb());
  });
  showCostSource();
  connect(loadSpec_, &QLineEdit::returnPressed, this, [this] { loadLoad(loadSpec_->text()); });
  connect(phase_, &QComboBox::currentIndexChanged, this, [this](int i) {
    const QSignalBlocker block(tokens_);
    tokens_->setValue(i == 0 ? planner::kDefaultPrefillTokensPerGpu
                             : planner::kDefaultDecodeBatchPerGpu);
    tokens_->setSuffix(i == 0 ? tr(" tokens/GPU") : tr(" sequences/GPU"));
    onWorkloadEdited();
  });
  connect(tokens_, &QSpinBox::valueChanged, this, &MainWindow::onWorkloadEdited);
  connect(isl_, &QSpinBox::valueChanged, this, &MainWindow::onWorkloadEdited);
  connect(target_, &QDoubleSpinBox::valueChanged, this, &MainWindow::onWorkloadEdited);
  connect(osl_, &QSpinBox::valueChanged, this, &MainWindow::onWorkloadEdited);
  connect(memFraction_, &QDoubleSpinBox::valueChanged, this, &MainWindow::onWorkloadEdited);
  connect(weights_, &QComboBox::currentIndexChanged, this, [this](int i) {
    const QString err = session_->setWeights(weights_->itemData(i).toString());
    errorLabel_->setText(err);
    errorLabel_->setVisible(!err.isEmpty());
    if (session_->model()) showModelTable(*session_->model());
  });
  connect(policy_, &QComboBox::currentIndexChanged, this, &MainWindow::onWorkloadEdited);
  connect(redundant_, &QSpinBox::valueChanged, this, &MainWindow::onWorkloadEdited);
  connect(redundantKind_, &QComboBox::currentIndexChanged, this, [this](int kind) {
    redundant_->setEnabled(kind != 2);
    redundant_->setMaximum(kind == 1 ? planner::kMaxRedundantTotal : planner::kMaxRedundantPerRank);
    onWorkloadEdited();
  });
  return page;
}

void MainWindow::showCostSource() {
  if (costFile_ == nullptr) return;  // a plan finished before the Model view was built
  const QString& db = session_->costDb();
  const QSignalBlocker block(costSource_);
  costSource_->setCurrentIndex(db.isEmpty() ? 0 : 1);
  // Without a DB the plan's own source says whether the roofline is calibrated for this device
  // (the status bar names it too); a plan still from a DB just dropped is not asked.
  const auto plan = session_->plan();
  const QString source = plan ? QString::fromStdString(plan->cost_source) : QString();
  const QString roofline =
      source.startsWith(QLatin1String(planner::kSourceCalibrated))
          ? tr("No cost DB: every figure is a roofline estimate, calibrated for this device "
               "against measured GPU tables (%1).")
                .arg(source)
      : source == QLatin1String(planner::kSourceRoofline)
          ? tr("No cost DB: every figure is a roofline estimate from the device spec and topology "
               "(no calibration for this device).")
          : tr("No cost DB: every figure is a roofline estimate.");
  costFile_->setText(db.isEmpty() ? roofline
                     : session_->costWarning().isEmpty()
                         ? tr("Cost DB: %1").arg(db)
                         : tr("Cost DB: %1<br><span style='color:#7a3e00'>Warning: %2</span>")
                               .arg(db.toHtmlEscaped(), session_->costWarning().toHtmlEscaped()));
}

bool MainWindow::loadCosts(const QString& path) {
  const QString err = session_->setCostDb(path);
  costError_->setText(err);
  costError_->setVisible(!err.isEmpty());
  showCostSource();
  return err.isEmpty();
}

void MainWindow::onOpenCosts() {
  const QString path =
      QFileDialog::getOpenFileName(this, tr("Open a cost database (profile DB)"), QString(),
                                   tr("Cost DB (*.db *.sqlite);;All (*)"));
  if (!path.isEmpty()) loadCosts(path);
}

bool MainWindow::loadModel(const QString& nameOrPath) {
  auto model = models::load_model(nameOrPath.toStdString());
  if (!model) {
    // The figures and the plan stay those of the model still loaded, and say so.
    const auto& current = session_->model();
    errorLabel_->setText(
        current ? tr("%1 — the figures and the plan are still those of %2.")
                      .arg(errorText(model.error()), QString::fromStdString(current->name))
                : errorText(model.error()));
    errorLabel_->show();
    if (current) selectModelInCombo(modelText_);
    statusBar()->showMessage(tr("Could not load %1").arg(nameOrPath));
    return false;
  }
  errorLabel_->hide();
  selectModelInCombo(nameOrPath);
  modelText_ = nameOrPath;
  const QString loadBefore = loadSpec_->text();
  session_->setModel(nameOrPath);
  showModelTable(session_->model() ? *session_->model() : *model);
  // The load follows the model; say so when it no longer fits (the plan then has no load and
  // says so; it never falls back to another load).
  loadError_->setVisible(!session_->load());
  if (!session_->load()) {
    loadError_->setText(tr("The load '%1' does not fit %2; choose another (the plan waits for a "
                           "load that fits).")
                            .arg(loadBefore, QString::fromStdString(model->name)));
  }
  if (useSettings_) QSettings().setValue(QStringLiteral("lastModel"), nameOrPath);
  statusBar()->showMessage(tr("Loaded %1").arg(QString::fromStdString(model->source_path)));
  return true;
}

void MainWindow::showModelTable(const models::MoeModel& model) {
  const auto rows = models::model_summary(model);
  modelTable_->setRowCount(static_cast<int>(rows.size()));
  for (int i = 0; i < static_cast<int>(rows.size()); ++i) {
    const auto& [label, value] = rows[static_cast<std::size_t>(i)];
    modelTable_->setItem(i, 0, new QTableWidgetItem(QString::fromStdString(label)));
    modelTable_->setItem(i, 1, new QTableWidgetItem(QString::fromStdString(value)));
  }
  modelTable_->resizeColumnToContents(0);
}

bool MainWindow::loadCluster(const QString& nameOrPath) {
  return topology_->openCluster(nameOrPath);
}

bool MainWindow::loadLoad(const QString& fileOrSpec) {
  loadSpec_->setText(fileOrSpec);
  const QString err = session_->setLoad(fileOrSpec);
  loadError_->setText(err);
  loadError_->setVisible(!err.isEmpty());
  if (err.isEmpty() && useSettings_) QSettings().setValue(QStringLiteral("lastLoad"), fileOrSpec);
  return err.isEmpty();
}

bool MainWindow::setPlacement(const QString& policy, int redundantPerRank) {
  const int i = policy_->findText(policy);
  if (i < 0 || redundantPerRank < redundant_->minimum() ||
      redundantPerRank > redundant_->maximum()) {
    return false;
  }
  policy_->setCurrentIndex(i);
  redundantKind_->setCurrentIndex(0);
  redundant_->setValue(redundantPerRank);
  onWorkloadEdited();
  return true;
}

void MainWindow::selectModelInCombo(const QString& nameOrPath) {
  // A bundled model by its name; a config.json by its path (added to the list once).
  int index = modelCombo_->findText(nameOrPath);
  if (index < 0) {
    modelCombo_->addItem(nameOrPath);
    index = modelCombo_->count() - 1;
  }
  const QSignalBlocker block(modelCombo_);
  modelCombo_->setCurrentIndex(index);
  modelCombo_->setToolTip(modelCombo_->itemText(index));
}

bool MainWindow::setPlacement(const QString& policy, const QString& redundant) {
  const int i = policy_->findText(policy);
  const auto r = planner::parse_plan_redundancy(redundant.toStdString());
  if (i < 0 || !r) return false;
  policy_->setCurrentIndex(i);
  redundantKind_->setCurrentIndex(static_cast<int>(r->kind));
  redundant_->setValue(r->count);
  onWorkloadEdited();
  return true;
}

void MainWindow::onModelChosen(int index) { loadModel(modelCombo_->itemText(index)); }

void MainWindow::onOpenConfig() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Open a Hugging Face config.json"),
                                                    QString(), tr("JSON (*.json)"));
  if (!path.isEmpty()) loadModel(path);
}

void MainWindow::onOpenLoad() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Open an expert load"), QString(),
                                                    tr("Expert loads (*.json *.csv *.npy)"));
  if (!path.isEmpty()) loadLoad(path);
}

void MainWindow::onWorkloadEdited() {
  if (restoring_) return;
  if (useSettings_) {
    QSettings s;
    s.setValue(QStringLiteral("phase"), phase_->currentText());
    s.setValue(QStringLiteral("tokens"), tokens_->value());
    s.setValue(QStringLiteral("isl"), isl_->value());
    s.setValue(QStringLiteral("osl"), osl_->value());
    s.setValue(QStringLiteral("memFraction"), memFraction_->value());
    s.setValue(QStringLiteral("latencyTarget"), target_->value());
    s.setValue(QStringLiteral("placement"), policy_->currentText());
    s.setValue(QStringLiteral("redundant"), redundant_->value());
    s.setValue(QStringLiteral("redundantKind"), redundantKind_->currentIndex());
  }
  planner::Workload w;
  w.phase = phase_->currentIndex() == 0 ? planner::Phase::kPrefill : planner::Phase::kDecode;
  w.tokens_per_gpu = tokens_->value();
  w.isl = isl_->value();
  w.osl = osl_->value();
  w.mem_fraction = memFraction_->value();
  session_->setWorkload(w, target_->value());
  const auto policy = planner::parse_policy(policy_->currentText().toStdString());
  planner::Redundancy redundancy;
  redundancy.kind = static_cast<planner::Redundancy::Kind>(redundantKind_->currentIndex());
  redundancy.count = redundancy.kind == planner::Redundancy::Kind::kAuto ? 0 : redundant_->value();
  if (policy) session_->setPolicy(*policy, redundancy);
}

ExportDialog* MainWindow::makeExportDialog() {
  QString format, folder;
  if (useSettings_) {
    QSettings s;
    format = s.value(QStringLiteral("exportFormat")).toString();
    folder = s.value(QStringLiteral("exportFolder")).toString();
  }
  auto* dialog = new ExportDialog(exportSourceOf(*session_), this, format, folder);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  if (useSettings_) {
    connect(dialog->formatCombo(), &QComboBox::currentTextChanged, this,
            [](const QString& f) { QSettings().setValue(QStringLiteral("exportFormat"), f); });
    connect(dialog->folderEdit(), &QLineEdit::textChanged, this, [](const QString& f) {
      QSettings().setValue(QStringLiteral("exportFolder"), f.trimmed());
    });
  }
  return dialog;
}

void MainWindow::onExport() {
  // The plan on screen: wait for a plan still running so the dialog shows the inputs set now.
  session_->waitForIdle();
  makeExportDialog()->open();
}

void MainWindow::onShowBackends() {
  QString text;
  for (const auto& b : kernels::backend_inventory()) {
    text +=
        QStringLiteral("%1: %2, %3 — %4\n")
            .arg(QString::fromStdString(b.name), b.compiled ? tr("compiled") : tr("not compiled"),
                 b.usable ? tr("usable") : tr("not usable"), QString::fromStdString(b.detail));
  }
  QMessageBox::information(this, tr("Backends"), text);
}

void MainWindow::closeEvent(QCloseEvent* event) {
  if (useSettings_) {
    QSettings s;
    s.setValue(QStringLiteral("geometry"), saveGeometry());
    s.setValue(QStringLiteral("windowState"), saveState());
  }
  session_->cancel();
  QMainWindow::closeEvent(event);
}

void MainWindow::waitForIdle() {
  profiling_->waitForIdle();
  session_->waitForIdle();
  session_->waitForServing();
  loadView_->waitForIdle();
  QCoreApplication::processEvents();
}

int MainWindow::saveScreenshots(const QString& dir) {
  if (!QDir().mkpath(dir)) return -1;
  waitForIdle();
  int written = 0;
  for (int i = 0; i < tabs_->count(); ++i) {
    tabs_->setCurrentIndex(i);
    QCoreApplication::processEvents();
    const QString file =
        QDir(dir).filePath(tabs_->widget(i)->objectName() + QStringLiteral(".png"));
    if (!grab().save(file)) return -1;
    ++written;
  }
  return written;
}

}  // namespace moeplan::gui
