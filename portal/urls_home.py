from django.contrib.auth import views as auth_views
from django.urls import path

from portal.views import home

urlpatterns = [
    path("", home.home, name="home"),
    path("login/", home.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
]
