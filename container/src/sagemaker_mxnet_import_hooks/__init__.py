"""What the image's .pth hooks share: after_import, a change made to a module once a program imports it."""
