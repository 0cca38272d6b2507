"""Rendering: model and results -> JSON documents or rich renderables. Never reads the system."""
