#pragma once
// The Knobs panel of a live session: one pool at a time (chosen in a combo box), its release
// threshold (value + unit, presets 0 / current used / UINT64_MAX), the three reuse policies, Trim
// to..., Reset watermarks. Every control sends a request through LiveSession and then shows what
// the driver reports in the acknowledgement, not what was asked for.

#include "poolscope/control/Protocol.h"

#include <QWidget>
#include <cstdint>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QPushButton;

namespace poolscope::ui {

class LiveSession;

class KnobsPanel : public QWidget {
    Q_OBJECT
public:
    explicit KnobsPanel(LiveSession* session, QWidget* parent = nullptr);

    uint64_t currentPool() const;
    void selectPool(uint64_t handle);
    // A release threshold and the three reuse policies at once, for `pool` (the What-if
    // panel's "Apply to the running program"): the same requests as this panel's own controls,
    // answered the same way (each acknowledgement shows the driver's read-back).
    void apply(uint64_t pool, uint64_t threshold, bool followEventDependencies,
               bool allowOpportunistic, bool allowInternalDependencies);

    // Widgets, for tests and for keyboard-driven use.
    QComboBox* poolBox() const { return poolBox_; }
    QDoubleSpinBox* thresholdValue() const { return thresholdValue_; }
    QComboBox* thresholdUnit() const { return thresholdUnit_; }
    QPushButton* applyThreshold() const { return applyThreshold_; }
    QPushButton* presetZero() const { return presetZero_; }
    QPushButton* presetUsed() const { return presetUsed_; }
    QPushButton* presetMax() const { return presetMax_; }
    QCheckBox* reuseToggle(PoolAttr a) const;
    QDoubleSpinBox* trimValue() const { return trimValue_; }
    QComboBox* trimUnit() const { return trimUnit_; }
    QPushButton* trimButton() const { return trimButton_; }
    QPushButton* resetButton() const { return resetButton_; }
    QLabel* reportedLabel() const { return reported_; }
    QLabel* statusLabel() const { return status_; }

    // Bytes from a value and a unit index (B, KiB, MiB, GiB, TiB); exposed for tests.
    static uint64_t toBytes(double value, int unitIndex);

private:
    void rebuildPools();
    void showPool();
    void onAck(const control::Ack& ack);
    void setThreshold(uint64_t bytes);

    LiveSession* session_;
    QComboBox* poolBox_;
    QDoubleSpinBox* thresholdValue_;
    QComboBox* thresholdUnit_;
    QPushButton* applyThreshold_;
    QPushButton* presetZero_;
    QPushButton* presetUsed_;
    QPushButton* presetMax_;
    QCheckBox* follow_;
    QCheckBox* opportunistic_;
    QCheckBox* internal_;
    QDoubleSpinBox* trimValue_;
    QComboBox* trimUnit_;
    QPushButton* trimButton_;
    QPushButton* resetButton_;
    QLabel* reported_;
    QLabel* status_;
};

} // namespace poolscope::ui
