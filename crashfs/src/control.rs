//! The control protocol: one command a line, one answer a line.
