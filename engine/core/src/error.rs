//! Error types, one per failure domain.

/// A plugin fault during one evaluation. Never a decision: "does not fit" is `Ok(Verdict::Unschedulable)`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PluginError {
    /// The plugin failed with a message (a built-in's internal error, a guest's error reply).
    #[error("plugin {plugin} failed: {message}")]
    Failed {
        /// Plugin name.
        plugin: String,
        /// What went wrong.
        message: String,
    },
    /// The plugin exceeded its time budget.
    #[error("plugin {plugin} timed out")]
    Timeout {
        /// Plugin name.
        plugin: String,
    },
    /// The plugin exceeded its memory or output budget.
    #[error("plugin {plugin} exceeded its resource limits")]
    ResourceExhausted {
        /// Plugin name.
        plugin: String,
    },
    /// The plugin returned output the host could not use.
    #[error("plugin {plugin} returned invalid output: {message}")]
    InvalidOutput {
        /// Plugin name.
        plugin: String,
        /// What was wrong with it.
        message: String,
    },
}

impl PluginError {
    /// A generic failure of `plugin`.
    pub fn failed(plugin: impl Into<String>, message: impl Into<String>) -> Self {
        PluginError::Failed {
            plugin: plugin.into(),
            message: message.into(),
        }
    }

    /// The faulting plugin's name.
    pub fn plugin(&self) -> &str {
        match self {
            PluginError::Failed { plugin, .. }
            | PluginError::Timeout { plugin }
            | PluginError::ResourceExhausted { plugin }
            | PluginError::InvalidOutput { plugin, .. } => plugin,
        }
    }
}
