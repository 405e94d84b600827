// Chart views over Qt Charts, and the self-painted heat map.
#include "app/gui/charts.hpp"

#include <QAbstractItemModel>
#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QCursor>
#include <QFontMetrics>
#include <QHBoxLayout>
#include <QHelpEvent>
#include <QHorizontalStackedBarSeries>
#include <QLineSeries>
#include <QPainter>
#include <QResizeEvent>
#include <QScatterSeries>
#include <QStackedBarSeries>
#include <QToolTip>
#include <QVBoxLayout>
#include <QValueAxis>
#include <algorithm>
#include <cmath>
#include <limits>

#include "app/gui/plan_table_model.hpp"
#include "app/gui/session.hpp"
#include "planner/costs/measured_costs.hpp"

namespace moeplan::gui {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

QChartView* makeChartView(QWidget* parent) {
  auto* layout = new QVBoxLayout(parent);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* view = new QChartView(new QChart(), parent);
  view->setRenderHint(QPainter::Antialiasing);
  view->chart()->setMargins(QMargins(4, 4, 4, 4));
  view->chart()->legend()->setAlignment(Qt::AlignBottom);
  view->setMinimumHeight(180);
  layout->addWidget(view);
  return view;
}

void clearChart(QChart* chart) {
  chart->removeAllSeries();
  for (QAbstractAxis* a : chart->axes()) {
    chart->removeAxis(a);
    delete a;
  }
}

const QColor kPartColours[] = {QColor(0x4e, 0x79, 0xa7), QColor(0xf2, 0x8e, 0x2b),
                               QColor(0x59, 0xa1, 0x4f), QColor(0xe1, 0x57, 0x59),
                               QColor(0xb0, 0x7a, 0xa1), QColor(0x76, 0xb7, 0xb2)};

QString rowLabel(const QAbstractItemModel* m, int row) {
  auto text = [&](int col) { return m->index(row, col).data(Qt::DisplayRole).toString(); };
  return QStringLiteral("%1 %2 %3 %4")
      .arg(text(PlanTableModel::kRank), text(PlanTableModel::kLayout),
           text(PlanTableModel::kDispatcher),
           text(PlanTableModel::kMapping) == QStringLiteral("tp_innermost")
               ? QStringLiteral("tp-in")
               : QStringLiteral("ep-in"));
}

void watchModel(QAbstractItemModel* m, QObject* receiver, const std::function<void()>& f) {
  QObject::connect(m, &QAbstractItemModel::modelReset, receiver, f);
  QObject::connect(m, &QAbstractItemModel::layoutChanged, receiver, f);
  QObject::connect(m, &QAbstractItemModel::rowsInserted, receiver, f);
  QObject::connect(m, &QAbstractItemModel::rowsRemoved, receiver, f);
}

}  // namespace

BreakdownChart::BreakdownChart(QWidget* parent) : QWidget(parent) {
  chartView_ = makeChartView(this);
  chartView_->chart()->legend()->setAlignment(Qt::AlignRight);
}

QChart* BreakdownChart::chart() const { return chartView_->chart(); }

void BreakdownChart::setModel(QAbstractItemModel* view, const PlanTableModel* source) {
  view_ = view;
  source_ = source;
  watchModel(view, this, [this] { rebuild(); });
  rebuild();
}

int BreakdownChart::rowsThatFit() const {
  // Qt Charts hides the category labels that overlap: show only as many bars as have room for
  // a label (the plot is the chart less its title, axis and margins).
  const QFontMetrics fm(labelFont());
  const int plot = std::max(0, height() - 2 * fm.height() - 64);
  return std::clamp(plot / (fm.height() + 2), 1, kMaxRows);
}

QString shortCostSource(const QString& source) {
  static const QString kMeasured = QString::fromUtf8(planner::kSourceMeasuredPrefix);
  if (source.startsWith(kMeasured)) {
    // measured:PATH[ (statistic)]: the database's file name, and the statistic when not the median.
    QString rest = source.mid(kMeasured.size());
    QString statistic;
    const qsizetype open = rest.lastIndexOf(QStringLiteral(" ("));
    if (open >= 0 && rest.endsWith(QLatin1Char(')'))) {
      statistic = rest.mid(open);
      rest.truncate(open);
    }
    const qsizetype slash = rest.lastIndexOf(QLatin1Char('/'));
    return kMeasured + rest.mid(slash + 1) + statistic;
  }
  // roofline-calibrated (aiconfigurator-core …, trtllm …): the kind, without its provenance.
  const qsizetype open = source.indexOf(QStringLiteral(" ("));
  return open >= 0 ? source.left(open) : source;
}

QFont BreakdownChart::labelFont() const {
  QFont small = font();
  small.setPointSizeF(small.pointSizeF() * 0.8);
  return small;
}

void BreakdownChart::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  if (rowsThatFit() != shownRows_) rebuild();
}

void BreakdownChart::rebuild() {
  QChart* c = chart();
  clearChart(c);
  shownRows_ = rowsThatFit();
  const int n = view_ == nullptr ? 0 : std::min(view_->rowCount(), shownRows_);
  const planner::Plan* plan = source_ == nullptr ? nullptr : source_->plan();
  // The cost source goes under the x axis in its short form, which fits the chart's width at
  // 1366 × 768 (the whole name, "roofline-calibrated (aiconfigurator-core 0.12.0, trtllm …)" or a
  // database's full path, was cut off there); the whole name is the chart's tooltip and is in the
  // view's header.
  const QString source =
      plan != nullptr ? QString::fromStdString(plan->cost_source) : tr("no plan");
  chartView_->setToolTip(tr("Cost source: %1").arg(source));
  c->setTitle(tr("Time per MoE layer — first %1 rows of the table").arg(n));
  if (n == 0) return;
  auto* series = new QHorizontalStackedBarSeries();
  const int cols[] = {PlanTableModel::kRouter,  PlanTableModel::kDispatch, PlanTableModel::kExperts,
                      PlanTableModel::kCombine, PlanTableModel::kTp,       PlanTableModel::kShared};
  const char* names[] = {"router", "dispatch", "experts", "combine", "TP", "shared"};
  QStringList categories;
  // Bars top to bottom in table order: a horizontal bar axis grows upwards, so add reversed.
  for (int r = n - 1; r >= 0; --r) categories << rowLabel(view_, r);
  double maxTotal = 0.0;
  for (int p = 0; p < 6; ++p) {
    auto* set = new QBarSet(QString::fromLatin1(names[p]));
    set->setColor(kPartColours[p]);
    set->setBorderColor(kPartColours[p]);
    for (int r = n - 1; r >= 0; --r) {
      *set << view_->index(r, cols[p]).data(PlanTableModel::kValueRole).toDouble() * 1e3;
    }
    series->append(set);
  }
  for (int r = 0; r < n; ++r) {
    maxTotal = std::max(
        maxTotal,
        view_->index(r, PlanTableModel::kLayerTime).data(PlanTableModel::kValueRole).toDouble() *
            1e3);
  }
  series->setBarWidth(0.7);
  c->addSeries(series);
  auto* y = new QBarCategoryAxis();
  y->append(categories);
  y->setTruncateLabels(false);
  y->setLabelsFont(labelFont());
  auto* x = new QValueAxis();
  x->setTitleText(tr("ms per MoE layer (%1)").arg(shortCostSource(source)));
  x->setRange(0.0, maxTotal > 0.0 ? maxTotal * 1.05 : 1.0);
  x->applyNiceNumbers();
  x->setLabelFormat(QStringLiteral("%.1f"));
  c->addAxis(y, Qt::AlignLeft);
  c->addAxis(x, Qt::AlignBottom);
  series->attachAxis(y);
  series->attachAxis(x);
}

MemoryChart::MemoryChart(QWidget* parent) : QWidget(parent) {
  chartView_ = makeChartView(this);
  // Six parts and the HBM line: at the bottom of a third of the window their names were cut to
  // "e…", "s…"; on the right each keeps its name.
  chartView_->chart()->legend()->setAlignment(Qt::AlignRight);
  chartView_->chart()->legend()->setShowToolTips(true);
}

QChart* MemoryChart::chart() const { return chartView_->chart(); }

void MemoryChart::setModel(QAbstractItemModel* view, const PlanTableModel* source) {
  view_ = view;
  source_ = source;
  watchModel(view, this, [this] { rebuild(); });
  rebuild();
}

void MemoryChart::rebuild() {
  QChart* c = chart();
  clearChart(c);
  const planner::Plan* plan = source_ == nullptr ? nullptr : source_->plan();
  const int n = view_ == nullptr || plan == nullptr
                    ? 0
                    : std::min(view_->rowCount(), BreakdownChart::kMaxRows);
  const bool kv = plan != nullptr && plan->workload.counts_kv();
  c->setTitle(kv ? tr("Memory per GPU, GiB (KV cache included)")
                 : tr("Memory per GPU, GiB (no KV cache)"));
  if (n == 0) return;
  auto* series = new QStackedBarSeries();
  const char* names[] = {"experts", "shared", "dense", "buffers", "activations", "KV cache"};
  const int parts = kv ? 6 : 5;
  QStringList categories;
  std::vector<const planner::LayoutCost*> rows;
  for (int r = 0; r < n; ++r) {
    const int li = view_->index(r, 0).data(PlanTableModel::kLayoutIndexRole).toInt();
    rows.push_back(&plan->layouts[static_cast<std::size_t>(li)]);
    // The plan rank (unique, as a category axis needs; short, so all of them fit beside the
    // legend: the time chart beside it names each rank's layout).
    categories << view_->index(r, PlanTableModel::kRank).data(Qt::DisplayRole).toString();
  }
  double top = 0.0;
  for (int p = 0; p < parts; ++p) {
    auto* set = new QBarSet(QString::fromLatin1(names[p]));
    set->setColor(kPartColours[p]);
    set->setBorderColor(kPartColours[p]);
    for (const auto* lc : rows) {
      const auto& m = lc->memory;
      const double v[] = {m.experts, m.shared, m.dense, m.buffers, m.activations, m.kv_cache};
      *set << v[p] / kGiB;
    }
    series->append(set);
  }
  // The line: the HBM, or with a context the share of it the layouts may use.
  const double limit = rows.front()->memory_limit;
  for (const auto* lc : rows) {
    top = std::max({top, lc->memory.total() / kGiB, limit / kGiB});
  }
  c->addSeries(series);
  auto* x = new QBarCategoryAxis();
  x->append(categories);
  x->setTitleText(tr("plan rank (first %1 rows)").arg(n));
  x->setTruncateLabels(false);
  QFont small = x->labelsFont();
  small.setPointSizeF(small.pointSizeF() * 0.8);
  x->setLabelsFont(small);
  c->legend()->setFont(small);  // the axis labels' size: the legend takes less of the width
  auto* y = new QValueAxis();
  y->setTitleText(tr("GiB/GPU"));
  y->setRange(0.0, top * 1.08);
  y->applyNiceNumbers();
  y->setLabelFormat(QStringLiteral("%.0f"));
  c->addAxis(x, Qt::AlignBottom);
  c->addAxis(y, Qt::AlignLeft);
  series->attachAxis(x);
  series->attachAxis(y);
  // The capacity line over the same categories (a hidden value axis spans the bar slots).
  auto* cap = new QLineSeries();
  cap->setName(
      kv ? tr("%1 of HBM").arg(plan->workload.mem_fraction, 0, 'f', 2)
         : tr("HBM"));  // its GiB on the axis (a shorter legend leaves the bars their labels)
  QPen pen(QColor(0xb0, 0x00, 0x20));
  pen.setWidth(2);
  pen.setStyle(Qt::DashLine);
  cap->setPen(pen);
  cap->append(-0.5, limit / kGiB);
  cap->append(n - 0.5, limit / kGiB);
  c->addSeries(cap);
  auto* hidden = new QValueAxis();
  hidden->setRange(-0.5, n - 0.5);
  hidden->setVisible(false);
  c->addAxis(hidden, Qt::AlignTop);
  cap->attachAxis(hidden);
  cap->attachAxis(y);
}

GroupedBarChart::GroupedBarChart(QWidget* parent) : QWidget(parent) {
  chartView_ = makeChartView(this);
}

QChart* GroupedBarChart::chart() const { return chartView_->chart(); }

void GroupedBarChart::setData(const QString& title, const QStringList& categories,
                              const QStringList& series,
                              const std::vector<std::vector<double>>& values, const QString& xTitle,
                              const QString& yTitle) {
  QChart* c = chart();
  clearChart(c);
  c->setTitle(title);
  if (categories.isEmpty() || values.empty()) return;
  auto* bars = new QBarSeries();
  double top = 0.0;
  for (int s = 0; s < series.size(); ++s) {
    auto* set = new QBarSet(series[s]);
    set->setColor(kPartColours[s % 6]);
    set->setBorderColor(kPartColours[s % 6]);
    for (double v : values[static_cast<std::size_t>(s)]) {
      *set << v;
      top = std::max(top, v);
    }
    bars->append(set);
  }
  bars->setBarWidth(0.85);
  c->addSeries(bars);
  auto* x = new QBarCategoryAxis();
  x->append(categories);
  x->setTitleText(xTitle);
  // Whole labels: slanted when they would not fit side by side.
  x->setTruncateLabels(false);
  const QFontMetrics fm(x->labelsFont());
  int widest = 0;
  for (const QString& label : categories) widest = std::max(widest, fm.horizontalAdvance(label));
  if (static_cast<double>(widest) * static_cast<double>(categories.size()) >
      0.8 * std::max(width(), 400)) {
    x->setLabelsAngle(-45);
  }
  if (categories.size() > 32) {
    // Too many groups to label each: name the range instead.
    x->setLabelsVisible(false);
    x->setTitleText(tr("%1 %2 … %3").arg(xTitle, categories.front(), categories.back()));
  }
  auto* y = new QValueAxis();
  y->setTitleText(yTitle);
  y->setRange(0.0, top > 0.0 ? top * 1.1 : 1.0);
  y->applyNiceNumbers();
  y->setLabelFormat(QStringLiteral("%.0f"));
  c->addAxis(x, Qt::AlignBottom);
  c->addAxis(y, Qt::AlignLeft);
  bars->attachAxis(x);
  bars->attachAxis(y);
}

LineChart::LineChart(QWidget* parent) : QWidget(parent) { chartView_ = makeChartView(this); }

QChart* LineChart::chart() const { return chartView_->chart(); }

void LineChart::setData(const QString& title, const QStringList& series,
                        const std::vector<std::vector<double>>& values, const QString& xTitle,
                        const QString& yTitle, double yMin, double yMax, double xFirst) {
  QChart* c = chart();
  clearChart(c);
  c->setTitle(title);
  if (values.empty()) return;
  auto* x = new QValueAxis();
  x->setTitleText(xTitle);
  x->setLabelFormat(QStringLiteral("%d"));
  auto* y = new QValueAxis();
  y->setTitleText(yTitle);
  y->setRange(yMin, yMax);
  y->applyNiceNumbers();
  y->setLabelFormat(QStringLiteral("%.2f"));
  c->addAxis(x, Qt::AlignBottom);
  c->addAxis(y, Qt::AlignLeft);
  int n = 0;
  for (int s = 0; s < series.size(); ++s) {
    auto* line = new QLineSeries();
    line->setName(series[s]);
    QPen pen(kPartColours[s % 6]);
    pen.setWidth(2);
    line->setPen(pen);
    const auto& v = values[static_cast<std::size_t>(s)];
    for (std::size_t i = 0; i < v.size(); ++i) {
      line->append(xFirst + static_cast<double>(i), v[i]);
    }
    n = std::max(n, static_cast<int>(v.size()));
    c->addSeries(line);
    line->attachAxis(x);
    line->attachAxis(y);
  }
  x->setRange(xFirst, xFirst + std::max(1, n - 1));
  x->setTickCount(std::min(n, 11) > 1 ? std::min(n, 11) : 2);
}

ParetoChart::ParetoChart(QWidget* parent) : QWidget(parent) { chartView_ = makeChartView(this); }

QChart* ParetoChart::chart() const { return chartView_->chart(); }

void ParetoChart::setPoints(const std::vector<planner::ParetoPoint>& points) {
  points_ = points;
  QChart* c = chart();
  clearChart(c);
  c->setTitle(tr("Decode Pareto front (batch 1…1024 per GPU)"));
  if (points.empty()) return;
  auto* x = new QValueAxis();
  x->setTitleText(tr("tokens/s per user"));
  x->setLabelFormat(QStringLiteral("%.0f"));
  auto* y = new QValueAxis();
  y->setTitleText(tr("tokens/s per GPU"));
  y->setLabelFormat(QStringLiteral("%.0f"));
  c->addAxis(x, Qt::AlignBottom);
  c->addAxis(y, Qt::AlignLeft);
  auto* all = new QScatterSeries();
  all->setName(tr("batch (recommended layout)"));
  all->setMarkerSize(8.0);
  all->setColor(kPartColours[0]);
  auto* front = new QLineSeries();
  front->setName(tr("front"));
  QPen pen(kPartColours[1]);
  pen.setWidth(2);
  front->setPen(pen);
  std::vector<const planner::ParetoPoint*> on_front;
  double xmax = 0.0, ymax = 0.0;
  for (const auto& p : points) {
    all->append(p.tokens_per_s_per_user, p.tokens_per_s_per_gpu);
    xmax = std::max(xmax, p.tokens_per_s_per_user);
    ymax = std::max(ymax, p.tokens_per_s_per_gpu);
    if (p.on_front) on_front.push_back(&p);
  }
  std::sort(on_front.begin(), on_front.end(), [](const auto* a, const auto* b) {
    return a->tokens_per_s_per_user < b->tokens_per_s_per_user;
  });
  for (const auto* p : on_front) front->append(p->tokens_per_s_per_user, p->tokens_per_s_per_gpu);
  c->addSeries(front);
  c->addSeries(all);
  for (auto* s : {static_cast<QAbstractSeries*>(front), static_cast<QAbstractSeries*>(all)}) {
    s->attachAxis(x);
    s->attachAxis(y);
  }
  x->setRange(0.0, xmax * 1.08);
  y->setRange(0.0, ymax * 1.12);
  x->applyNiceNumbers();
  y->applyNiceNumbers();
  // Hovering a point names its batch, layout and TPOT.
  connect(all, &QScatterSeries::hovered, this, [this](const QPointF& at, bool state) {
    if (!state) {
      QToolTip::hideText();
      return;
    }
    for (const auto& p : points_) {
      if (std::abs(p.tokens_per_s_per_user - at.x()) <= 1e-9 * std::max(1.0, at.x()) &&
          std::abs(p.tokens_per_s_per_gpu - at.y()) <= 1e-9 * std::max(1.0, at.y())) {
        QToolTip::showText(
            QCursor::pos(),
            tr("%1 sequences per GPU: %2 %3, TPOT %4 ms")
                .arg(p.batch_per_gpu)
                .arg(QString::fromStdString(p.best.layout.shape_name()),
                     QString::fromStdString(planner::dispatcher_name(p.best.layout.dispatcher)))
                .arg(p.best.step_seconds * 1e3, 0, 'f', 2));
        return;
      }
    }
  });
}

HeatMap::HeatMap(QWidget* parent) : QWidget(parent) {
  setMinimumSize(240, 200);
  setMouseTracking(true);
  format_ = [](double v) { return QString::number(v, 'g', 3); };
}

void HeatMap::setData(const QString& title, const std::vector<std::vector<double>>& values,
                      const QString& rowTitle, const QString& colTitle, const QString& unit) {
  title_ = title;
  values_ = values;
  rowTitle_ = rowTitle;
  colTitle_ = colTitle;
  unit_ = unit;
  updateRange();
  update();
}

void HeatMap::setRange(double lo, double hi) {
  fixedLo_ = lo;
  fixedHi_ = hi;
  updateRange();
  update();
}

void HeatMap::updateRange() {
  max_ = 0.0;
  min_ = std::numeric_limits<double>::infinity();
  for (const auto& r : values_) {
    for (double v : r) {
      max_ = std::max(max_, v);
      if (v > 0.0) min_ = std::min(min_, v);
    }
  }
  if (!fromMin_ || !std::isfinite(min_)) min_ = 0.0;
  if (fixedLo_ <= fixedHi_) {
    min_ = fixedLo_;
    max_ = fixedHi_;
  }
}

void HeatMap::setBlocks(int rowBlock, int colBlock) {
  rowBlock_ = rowBlock;
  colBlock_ = colBlock;
  update();
}

QSize HeatMap::sizeHint() const { return {420, 320}; }

QRect HeatMap::plotRect() const {
  const int left = 58, top = 28, right = 92, bottom = 40;
  return QRect(left, top, std::max(10, width() - left - right),
               std::max(10, height() - top - bottom));
}

QColor HeatMap::zeroColour() { return QColor(0xd4, 0xd4, 0xd4); }

QColor HeatMap::colourOf(double v) const {
  if (v == 0.0) return zeroColour();
  // Equal bounds (every non-zero value the same): the middle of the scale.
  const double t = max_ > min_ ? std::clamp((v - min_) / (max_ - min_), 0.0, 1.0) : 0.5;
  // Light blue (#c6dbef) → dark blue (#08306b): the smallest non-zero value stays visible.
  const auto mix = [t](int a, int b) { return static_cast<int>(std::lround(a + t * (b - a))); };
  return QColor(mix(0xc6, 0x08), mix(0xdb, 0x30), mix(0xef, 0x6b));
}

QRect HeatMap::cellRect(int r, int c) const {
  const QRect pr = plotRect();
  const auto rows = static_cast<int>(values_.size());
  const auto cols = rows == 0 ? 0 : static_cast<int>(values_.front().size());
  if (rows == 0 || cols == 0) return {};
  const int y0 = pr.top() + r * pr.height() / rows;
  const int y1 = pr.top() + (r + 1) * pr.height() / rows;
  const int x0 = pr.left() + c * pr.width() / cols;
  const int x1 = pr.left() + (c + 1) * pr.width() / cols;
  return QRect(x0, y0, std::max(1, x1 - x0), std::max(1, y1 - y0));
}

QString HeatMap::cellText(int r, int c) const {
  return QStringLiteral("%1 %2, %3 %4: %5 %6")
      .arg(rowTitle_)
      .arg(r)
      .arg(colTitle_)
      .arg(c)
      .arg(format_(values_[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)]), unit_);
}

bool HeatMap::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip && !values_.empty()) {
    auto* he = static_cast<QHelpEvent*>(e);
    const QRect pr = plotRect();
    const auto rows = static_cast<int>(values_.size());
    const auto cols = static_cast<int>(values_.front().size());
    if (pr.contains(he->pos()) && cols > 0) {
      const int r = (he->pos().y() - pr.top()) * rows / pr.height();
      const int c = (he->pos().x() - pr.left()) * cols / pr.width();
      if (r >= 0 && r < rows && c >= 0 && c < cols) {
        QToolTip::showText(he->globalPos(), cellText(r, c), this);
        return true;
      }
    }
    QToolTip::hideText();
    return true;
  }
  return QWidget::event(e);
}

void HeatMap::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  p.setPen(palette().text().color());
  QFont bold = font();
  bold.setBold(true);
  p.setFont(bold);
  p.drawText(QRect(0, 4, width(), 20), Qt::AlignHCenter | Qt::AlignVCenter, title_);
  p.setFont(font());
  if (values_.empty() || values_.front().empty()) {
    p.drawText(rect(), Qt::AlignCenter, tr("no data"));
    return;
  }
  const QRect pr = plotRect();
  const auto rows = static_cast<int>(values_.size());
  const auto cols = static_cast<int>(values_.front().size());
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      p.fillRect(cellRect(r, c),
                 colourOf(values_[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)]));
    }
  }
  p.setPen(QColor(0x60, 0x60, 0x60));
  p.drawRect(pr.adjusted(0, 0, -1, -1));
  QPen block(QColor(0xd0, 0x30, 0x30));
  block.setWidth(2);
  p.setPen(block);
  if (colBlock_ > 0 && colBlock_ < cols) {
    for (int c = colBlock_; c < cols; c += colBlock_) {
      const int x = pr.left() + c * pr.width() / cols;
      p.drawLine(x, pr.top(), x, pr.bottom());
    }
  }
  if (rowBlock_ > 0 && rowBlock_ < rows) {
    for (int r = rowBlock_; r < rows; r += rowBlock_) {
      const int y = pr.top() + r * pr.height() / rows;
      p.drawLine(pr.left(), y, pr.right(), y);
    }
  }
  // Axis ticks: at most ~16 labels per axis.
  p.setPen(palette().text().color());
  const QFontMetrics fm(font());
  const int colStep = std::max(1, (cols + 15) / 16);
  for (int c = 0; c < cols; c += colStep) {
    const int x = pr.left() + (2 * c + 1) * pr.width() / (2 * cols);
    p.drawText(QRect(x - 20, pr.bottom() + 2, 40, fm.height()), Qt::AlignHCenter,
               QString::number(c));
  }
  const int rowStep = std::max(1, (rows * fm.height() + pr.height() - 1) / pr.height());
  for (int r = 0; r < rows; r += rowStep) {
    const int y = pr.top() + (2 * r + 1) * pr.height() / (2 * rows);
    p.drawText(QRect(pr.left() - 34, y - fm.height() / 2, 30, fm.height()),
               Qt::AlignRight | Qt::AlignVCenter, QString::number(r));
  }
  p.drawText(QRect(pr.left(), pr.bottom() + 2 + fm.height(), pr.width(), fm.height()),
             Qt::AlignHCenter, colTitle_);
  p.save();
  p.translate(12, pr.center().y());
  p.rotate(-90);
  p.drawText(QRect(-pr.height() / 2, -fm.height() / 2, pr.height(), fm.height()), Qt::AlignCenter,
             rowTitle_);
  p.restore();
  // Colour bar: the non-zero scale, and zero's own swatch below it.
  const int swatch = fm.height();
  const QRect bar(pr.right() + 12, pr.top(), 14, std::max(10, pr.height() - swatch - 6));
  const QRect zero(bar.left(), bar.bottom() + 6, bar.width(), swatch);
  const bool flat = !(max_ > min_);
  for (int y = 0; y < bar.height(); ++y) {
    const double v = flat ? max_ : max_ - (max_ - min_) * y / std::max(1, bar.height() - 1);
    p.setPen(max_ > 0.0 ? colourOf(std::max(v, std::numeric_limits<double>::min())) : zeroColour());
    p.drawLine(bar.left(), bar.top() + y, bar.right(), bar.top() + y);
  }
  p.fillRect(zero, zeroColour());
  p.setPen(palette().text().color());
  p.drawRect(bar.adjusted(0, 0, -1, -1));
  p.drawRect(zero.adjusted(0, 0, -1, -1));
  const int tx = bar.right() + 3;
  if (flat) {
    // Every non-zero value is the same: one label, no range.
    p.drawText(QRect(tx, bar.center().y() - fm.height(), 86, fm.height()), Qt::AlignLeft,
               max_ > 0.0 ? tr("all %1").arg(format_(max_)) : tr("none"));
  } else {
    p.drawText(QRect(tx, bar.top(), 86, fm.height()), Qt::AlignLeft, format_(max_));
    p.drawText(QRect(tx, bar.bottom() - fm.height(), 86, fm.height()), Qt::AlignLeft,
               format_(min_ > 0.0 ? min_ : 0.0));
  }
  p.drawText(QRect(tx, bar.center().y(), 86, fm.height()), Qt::AlignLeft, unit_);
  p.drawText(QRect(tx, zero.top(), 86, fm.height()), Qt::AlignLeft, tr("0 (none)"));
}

}  // namespace moeplan::gui
