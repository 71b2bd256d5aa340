"""Signing in to the dashboard (login required, demo credentials)."""

import re

import pytest
from playwright.sync_api import expect

from .conftest import log_in

pytestmark = pytest.mark.browser


def test_an_anonymous_visitor_is_sent_to_the_login_page(page, shot):
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    expect(page.get_by_label("Username")).to_be_visible()
    shot("login page")


def test_the_demo_reviewer_signs_in_and_lands_on_the_dashboard(page, shot):
    log_in(page)
    expect(page).not_to_have_url(re.compile(r"/accounts/login/"))
    shot("after login")


def test_a_wrong_password_keeps_the_visitor_on_the_login_page(page, shot):
    log_in(page, password="not-the-password")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    shot("login refused")
