// The serving view.
#include "app/gui/serving_view.hpp"

#include <cmath>
#include <map>
#include <string>

#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>

#include "app/gui/session.hpp"
#include "models/units.hpp"
#include "planner/layout.hpp"

namespace moeplan::gui {

namespace {

QString fixed(double v, int digits) { return QString::fromStdString(format_fixed(v, digits)); }

/// A time in ms, or "unbounded" (a queue at its capacity), as the CLI's table.
QString msCell(double seconds, int digits) {
  return std::isfinite(seconds) ? fixed(seconds * 1e3, digits) : QObject::tr("unbounded");
}

// The inputs this view's fields hold, by the names its reasons use.
const std::map<std::string, std::string> kServingLabels = {{"gpus", "GPU budget"},
                                                           {"rate", "Offered rate"},
                                                           {"tpot_ms", "TPOT target"},
                                                           {"ttft_ms", "TTFT target"}};

QString layoutText(const planner::PoolInstance& p) {
  return QString::fromStdString(p.layout.layout.shape_name() + " " +
                                planner::dispatcher_name(p.layout.layout.dispatcher));
}

}  // namespace

ServingView::ServingView(Session* session, QWidget* parent) : QWidget(parent), session_(session) {
  auto* layout = new QVBoxLayout(this);
  auto* intro = new QLabel(
      tr("Aggregated serving (every instance runs prefill and decode on one layout) against "
         "disaggregated prefill and decode pools (each with its own layout and GPU count, the KV "
         "cache sent between them on the cluster's links), for requests of the Model & workload "
         "view's context, on the model, cluster, load, placement and cost source planned there; "
         "as moeplan plan --disagg."),
      this);
  intro->setWordWrap(true);
  layout->addWidget(intro);

  auto* row = new QHBoxLayout();
  auto* ttftLabel = new QLabel(tr("T&argets: TTFT ≤"), this);
  ttft_ = new QDoubleSpinBox(this);
  ttftLabel->setBuddy(ttft_);
  ttft_->setRange(0.0, 1e6);
  ttft_->setDecimals(1);
  ttft_->setSingleStep(100.0);
  ttft_->setSpecialValueText(tr("no target"));
  ttft_->setSuffix(tr(" ms"));
  ttft_->setToolTip(tr("Time to first token, the KV transfer included (moeplan plan --ttft-ms)"));
  auto* tpotLabel = new QLabel(tr("TP&OT ≤"), this);
  tpot_ = new QDoubleSpinBox(this);
  tpotLabel->setBuddy(tpot_);
  tpot_->setRange(0.0, 1e6);
  tpot_->setDecimals(2);
  tpot_->setSingleStep(5.0);
  tpot_->setSpecialValueText(tr("no target"));
  tpot_->setSuffix(tr(" ms"));
  tpot_->setToolTip(tr("Time per output token (moeplan plan --tpot-ms)"));
  auto* budgetLabel = new QLabel(tr("&GPU budget:"), this);
  budget_ = new QSpinBox(this);
  budgetLabel->setBuddy(budget_);
  budget_->setRange(0, 1 << 20);
  budget_->setSpecialValueText(tr("the cluster's"));
  budget_->setToolTip(
      tr("GPUs for the whole deployment, split into the pools (moeplan plan --disagg --gpus); "
         "0: every GPU of the cluster"));
  auto* rateLabel = new QLabel(tr("Offered rat&e:"), this);
  rate_ = new QDoubleSpinBox(this);
  rateLabel->setBuddy(rate_);
  rate_->setRange(0.0, 1e6);
  rate_->setDecimals(2);
  rate_->setSingleStep(1.0);
  rate_->setSpecialValueText(tr("the most"));
  rate_->setSuffix(tr(" req/s"));
  rate_->setToolTip(
      tr("Requests per second offered, Poisson arrivals (moeplan plan --disagg --rate): the "
         "deployment with the fewest GPUs that serves them within the targets; 0: the most "
         "requests/s the budget serves"));
  auto* percentileLabel = new QLabel(tr("Per&centile:"), this);
  percentile_ = new QDoubleSpinBox(this);
  percentileLabel->setBuddy(percentile_);
  percentile_->setRange(0.0, 99.99);
  percentile_->setDecimals(2);
  percentile_->setSingleStep(1.0);
  percentile_->setPrefix(tr("p"));
  percentile_->setSpecialValueText(tr("mean"));
  percentile_->setToolTip(
      tr("The TTFT target holds for this percentile of the requests, e.g. 90 or 99 (moeplan "
         "plan --disagg --ttft-percentile); 0: the mean"));
  auto* batchesLabel = new QLabel(tr("&Decode batches:"), this);
  batches_ = new QLineEdit(this);
  batchesLabel->setBuddy(batches_);
  batches_->setPlaceholderText(tr("default: powers of 2, 1 to 1024"));
  // Wide enough for the placeholder, plus the line edit's frame and text margins.
  constexpr int kFrameAndMargins = 24;
  batches_->setMinimumWidth(batches_->fontMetrics().horizontalAdvance(batches_->placeholderText()) +
                            kFrameAndMargins);
  batches_->setToolTip(
      tr("Sequences per GPU the decode and aggregated instances try, comma-separated (moeplan "
         "plan --disagg --batches); empty: the powers of 2 from 1 to 1024"));
  plan_ = new QPushButton(tr("Pla&n serving"), this);
  plan_->setToolTip(tr("Plan both deployments in the background"));
  cancel_ = new QPushButton(tr("Cancel"), this);
  cancel_->setToolTip(tr("Abandon the running serving plan"));
  cancel_->hide();
  progress_ = new QProgressBar(this);
  progress_->setRange(0, 0);
  progress_->setMaximumWidth(140);
  progress_->hide();
  for (QWidget* w : std::initializer_list<QWidget*>{ttftLabel, ttft_, percentileLabel, percentile_,
                                                    tpotLabel, tpot_, budgetLabel, budget_}) {
    row->addWidget(w);
  }
  row->addStretch(1);
  layout->addLayout(row);
  auto* row2 = new QHBoxLayout();
  for (QWidget* w : std::initializer_list<QWidget*>{rateLabel, rate_, batchesLabel, batches_, plan_,
                                                    cancel_, progress_}) {
    row2->addWidget(w);
  }
  row2->addStretch(1);
  layout->addLayout(row2);

  header_ = new QLabel(this);
  header_->setWordWrap(true);
  layout->addWidget(header_);
  error_ = new QLabel(this);
  error_->setStyleSheet(QStringLiteral("color: #b00020;"));
  error_->setWordWrap(true);
  error_->hide();
  layout->addWidget(error_);

  table_ = new QTableWidget(0, 12, this);
  table_->setHorizontalHeaderLabels({tr("deployment"), tr("pool"), tr("instances"), tr("GPUs"),
                                     tr("layout"), tr("batch"), tr("TTFT ms"), tr("TPOT ms"),
                                     tr("req/s"), tr("tok/s/GPU"), tr("tok/s/user"),
                                     tr("step ms")});
  table_->verticalHeader()->hide();
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionMode(QAbstractItemView::NoSelection);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->setMaximumHeight(140);
  layout->addWidget(table_);

  recommendation_ = new QLabel(this);
  recommendation_->setWordWrap(true);
  recommendation_->setTextFormat(Qt::RichText);
  recommendation_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  recommendation_->setStyleSheet(
      QStringLiteral("QLabel { background: #eef7ec; border: 1px solid #9ccc94; padding: 6px; }"));
  recommendation_->hide();
  layout->addWidget(recommendation_);
  layout->addStretch(1);

  connect(plan_, &QPushButton::clicked, this, [this] { start(); });
  connect(cancel_, &QPushButton::clicked, session_, &Session::cancelServing);
  connect(session_, &Session::servingStarted, this, [this] {
    progress_->show();
    cancel_->show();
    plan_->setEnabled(false);
  });
  connect(session_, &Session::servingCancelled, this, [this] {
    progress_->hide();
    cancel_->hide();
    plan_->setEnabled(true);
    error_->setText(tr("Serving plan cancelled."));
    error_->show();
  });
  connect(session_, &Session::servingFinished, this, &ServingView::showResult);
  showResult();
}

bool ServingView::start() {
  std::vector<int> batches;
  for (const QString& part : batches_->text().split(QLatin1Char(','), Qt::SkipEmptyParts)) {
    bool ok = false;
    const int b = part.trimmed().toInt(&ok);
    if (!ok) {
      error_->setText(tr("Decode batches: expected sequences per GPU, comma-separated "
                         "counts; got '%1'")
                          .arg(part.trimmed()));
      error_->show();
      return false;
    }
    batches.push_back(b);
  }
  session_->planServing(ttft_->value(), tpot_->value(), budget_->value(), rate_->value(),
                        percentile_->value(), std::move(batches));
  return session_->servingBusy() || session_->serving() != nullptr;
}

void ServingView::showResult() {
  progress_->hide();
  cancel_->hide();
  plan_->setEnabled(true);
  const auto s = session_->serving();
  const QString err = session_->servingError();
  error_->setText(err);
  error_->setVisible(!err.isEmpty());
  table_->setRowCount(0);
  if (!s) {
    header_->setText(err.isEmpty() ? tr("No serving plan yet: set the targets and the budget, "
                                        "then Plan serving.")
                                   : QString());
    recommendation_->hide();
    return;
  }
  QString head = tr("%1 on %2, %3 GPUs, requests of %4 + %5 tokens")
                     .arg(QString::fromStdString(s->model), QString::fromStdString(s->cluster))
                     .arg(s->gpu_budget)
                     .arg(s->isl)
                     .arg(s->osl);
  if (s->ttft_target_s > 0.0) {
    head += tr(", TTFT ≤ %1 ms").arg(fixed(s->ttft_target_s * 1e3, 1));
    if (s->ttft_percentile > 0.0) {
      head +=
          tr(" at %1").arg(QString::fromStdString(planner::percentile_name(s->ttft_percentile)));
    }
  }
  if (s->tpot_target_s > 0.0) head += tr(", TPOT ≤ %1 ms").arg(fixed(s->tpot_target_s * 1e3, 2));
  if (s->arrival_rate > 0.0) head += tr(", %1 requests/s offered").arg(fixed(s->arrival_rate, 2));
  head += tr("; cost source: %1; %2 instance plans costed (every legal layout of each)")
              .arg(QString::fromStdString(s->cost_source))
              .arg(s->plans_costed);
  if (!session_->servingMisses().empty()) {
    head += tr("; %1 kinds of query missed the cost database and used the roofline")
                .arg(session_->servingMisses().size());
  }
  header_->setText(head);
  auto addRow = [this](const QStringList& cells) {
    const int r = table_->rowCount();
    table_->insertRow(r);
    for (int c = 0; c < cells.size(); ++c) {
      auto* item = new QTableWidgetItem(cells[c]);
      if (c >= 2 && c != 4) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      table_->setItem(r, c, item);
    }
  };
  // With a percentile the TTFT column is that percentile, as in the CLI's table.
  const bool pct = s->ttft_percentile > 0.0;
  table_->horizontalHeaderItem(6)->setText(
      pct ? tr("TTFT %1 ms")
                .arg(QString::fromStdString(planner::percentile_name(s->ttft_percentile)))
          : tr("TTFT ms"));
  if (s->disaggregated) {
    const auto& d = *s->disaggregated;
    addRow({tr("disaggregated"), tr("prefill"), QString::number(d.prefill_instances),
            QString::number(d.prefill.gpus), layoutText(d.prefill),
            tr("%1 prompts").arg(d.prefill.batch), msCell(pct ? d.ttft_quantile_s : d.ttft_s, 1),
            QString(), fixed(d.prefill_instances * d.prefill.requests_per_s, 2), QString(),
            QString(), fixed(d.prefill.step_s * 1e3, 2)});
    addRow({QString(), tr("decode"), QString::number(d.decode_instances),
            QString::number(d.decode.gpus), layoutText(d.decode),
            tr("%1 seqs/GPU").arg(d.decode.batch), QString(), fixed(d.tpot_s * 1e3, 2),
            fixed(d.decode_instances * d.decode.requests_per_s, 2),
            fixed(d.tokens_per_s_per_gpu, 1), fixed(d.tokens_per_s_per_user, 1),
            fixed(d.decode.step_s * 1e3, 2)});
  }
  if (s->aggregated) {
    const auto& a = *s->aggregated;
    addRow({tr("aggregated"), tr("both"), QString::number(a.instances),
            QString::number(a.instance.gpus), layoutText(a.instance),
            tr("%1 seqs/GPU").arg(a.instance.batch), msCell(pct ? a.ttft_quantile_s : a.ttft_s, 1),
            fixed(a.tpot_s * 1e3, 2), fixed(a.requests_per_s, 2), fixed(a.tokens_per_s_per_gpu, 1),
            fixed(a.tokens_per_s_per_user, 1), fixed(a.instance.step_s * 1e3, 2)});
  }
  QString rec =
      tr("<b>Recommended: %1</b>")
          .arg(s->recommended.empty() ? tr("none (no deployment meets the targets)")
                                      : QString::fromStdString(s->recommended).toHtmlEscaped());
  if (!s->reasons.empty()) {
    rec += QStringLiteral("<ul style=\"margin: 2px;\">");
    for (const auto& r : s->reasons) {
      // Reasons may name inputs as "{rate}": this view's fields, the others' labels elsewhere.
      rec += QStringLiteral("<li>") + errorText(Error{r}, kServingLabels).toHtmlEscaped() +
             QStringLiteral("</li>");
    }
    rec += QStringLiteral("</ul>");
  }
  if (s->disaggregated) {
    rec += tr("KV cache per request: %1 MiB, sent from prefill to decode in %2 ms per prefill "
              "step (on the cluster's links, counted in the TTFT).<br>")
               .arg(fixed(s->disaggregated->kv_bytes_per_request / 1048576.0, 1),
                    fixed(s->disaggregated->kv_transfer_s * 1e3, 2));
  }
  rec += tr("TTFT: the mean under Poisson arrivals at the deployment's rate — the wait for the "
            "prefill work ahead (M/D/1 per prefill instance; in an aggregated one, M/D/1 for the "
            "chunks of its mixed passes, its decode passes as vacations) + the prompt's prefill "
            "(+ the KV transfer) + the wait for a free decode slot (M/D/c: GPUs × sequences "
            "per GPU slots, each held osl × TPOT); unbounded where the prefill or the slots run "
            "at their capacity.<br>"
            "%1; "
            "step ms: one prefill step of the pool's prompts, one decode step; aggregated: the "
            "mean pass (decode and mixed).")
             .arg(s->arrival_rate > 0.0
                      ? tr("tok/s/GPU: output tokens per second over the GPUs used; req/s: "
                           "requests the pool can complete per second (the deployment runs at the "
                           "offered rate)")
                      : tr("tok/s/GPU: output tokens per second over the whole budget; req/s: "
                           "requests completed per second by the pool (the deployment runs at the "
                           "slower pool's rate, or below it where the TTFT target needs a shorter "
                           "queue)"));
  recommendation_->setText(rec);
  recommendation_->show();
}

}  // namespace moeplan::gui
